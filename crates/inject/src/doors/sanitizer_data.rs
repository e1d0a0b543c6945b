//! The Compute Sanitizer API's callback data that the binary route reads, laid out exactly
//! as `sanitizer_callbacks.h` (CUDA 13.0) lays it out: the driver hands a pointer to its C
//! struct, so every field before the one read must match in size and alignment. The test
//! below compiles the header with the C compiler and compares every offset.

use std::ffi::{c_char, c_int, c_void};

/// `Sanitizer_LaunchData`: a launch begun (`SANITIZER_CB_DOMAIN_LAUNCH`), or a kernel node
/// of a graph launched (inside [`GraphNodeLaunchData`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LaunchData {
    pub context: *mut c_void,
    pub stream: *mut c_void,
    pub hstream: *mut c_void,
    pub module: *mut c_void,
    pub function: *mut c_void,
    pub function_name: *const c_char,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub cluster: [u32; 3],
    pub grid_id: u64,
    /// `Sanitizer_LaunchHandle`: valid between the launch's begin and end callbacks.
    pub hlaunch: *mut c_void,
    pub device: c_int,
    pub api_context: *mut c_void,
    pub api_stream: *mut c_void,
    pub hapi_stream: *mut c_void,
}

/// `CU_GRAPH_NODE_TYPE_KERNEL`.
pub const GRAPH_NODE_KERNEL: u32 = 0;

/// `Sanitizer_GraphNodeLaunchData` (`SANITIZER_CBID_GRAPHS_NODE_LAUNCH_BEGIN`).
#[repr(C)]
pub struct GraphNodeLaunchData {
    pub graph_exec: *mut c_void,
    pub launch_id: u32,
    pub node: *mut c_void,
    /// `CUgraphNodeType`, a C enum.
    pub node_type: u32,
    pub data: NodeData,
    /// The node callback is part of a graph upload (`cuGraphUpload`, or an instantiation
    /// that uploads), not of a launch.
    pub is_graph_upload: u32,
}

/// The union of `Sanitizer_GraphNodeLaunchData`: only a kernel node's launch is read; its
/// largest member, `Sanitizer_MemcpyData` (144 bytes), sets where `isGraphUpload` lies.
#[repr(C)]
pub union NodeData {
    pub launch: LaunchData,
    largest: [u64; 18],
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use std::path::PathBuf;

    /// The headers of the pinned toolkit (as `build.rs` finds nvcc).
    fn include() -> PathBuf {
        let cuda = std::env::var_os("GPUSAN_CUDA")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.toolchain/nvidia/cu13"));
        cuda.join("include")
    }

    /// `name value` lines the C compiler computes from `sanitizer_callbacks.h`.
    fn c_layout(fields: &[(&str, &str, &str)]) -> Vec<(String, usize)> {
        let dir = tempfile::tempdir().unwrap();
        let mut c = String::from(
            "#include <stdio.h>\n#include <stddef.h>\n#include <sanitizer_callbacks.h>\nint main(void) {\n",
        );
        for (label, ty, field) in fields {
            let expr = if field.is_empty() { format!("sizeof({ty})") } else { format!("offsetof({ty}, {field})") };
            c.push_str(&format!("    printf(\"{label} %zu\\n\", (size_t){expr});\n"));
        }
        c.push_str("    return 0;\n}\n");
        let (src, exe) = (dir.path().join("layout.c"), dir.path().join("layout"));
        std::fs::write(&src, c).unwrap();
        let cc = std::process::Command::new("cc").arg("-I").arg(include()).arg("-o").arg(&exe).arg(&src).status();
        assert!(cc.unwrap().success(), "cc could not compile against {}", include().display());
        let out = std::process::Command::new(&exe).output().unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (k, v) = l.split_once(' ').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn callback_data_matches_the_c_headers() {
        let l = "Sanitizer_LaunchData";
        let n = "Sanitizer_GraphNodeLaunchData";
        let fields: Vec<(&str, &str, &str, usize)> = vec![
            ("launch.context", l, "context", offset_of!(LaunchData, context)),
            ("launch.stream", l, "stream", offset_of!(LaunchData, stream)),
            ("launch.hStream", l, "hStream", offset_of!(LaunchData, hstream)),
            ("launch.module", l, "module", offset_of!(LaunchData, module)),
            ("launch.function", l, "function", offset_of!(LaunchData, function)),
            ("launch.functionName", l, "functionName", offset_of!(LaunchData, function_name)),
            ("launch.gridDim_x", l, "gridDim_x", offset_of!(LaunchData, grid)),
            ("launch.blockDim_x", l, "blockDim_x", offset_of!(LaunchData, block)),
            ("launch.clusterDim_x", l, "clusterDim_x", offset_of!(LaunchData, cluster)),
            ("launch.gridId", l, "gridId", offset_of!(LaunchData, grid_id)),
            ("launch.hLaunch", l, "hLaunch", offset_of!(LaunchData, hlaunch)),
            ("launch.device", l, "device", offset_of!(LaunchData, device)),
            ("launch.apiContext", l, "apiContext", offset_of!(LaunchData, api_context)),
            ("launch.apiStream", l, "apiStream", offset_of!(LaunchData, api_stream)),
            ("launch.hApiStream", l, "hApiStream", offset_of!(LaunchData, hapi_stream)),
            ("launch.size", l, "", size_of::<LaunchData>()),
            ("node.graphExec", n, "graphExec", offset_of!(GraphNodeLaunchData, graph_exec)),
            ("node.launchId", n, "launchId", offset_of!(GraphNodeLaunchData, launch_id)),
            ("node.node", n, "node", offset_of!(GraphNodeLaunchData, node)),
            ("node.nodeType", n, "nodeType", offset_of!(GraphNodeLaunchData, node_type)),
            ("node.launchData", n, "launchData", offset_of!(GraphNodeLaunchData, data)),
            ("node.isGraphUpload", n, "isGraphUpload", offset_of!(GraphNodeLaunchData, is_graph_upload)),
            ("node.size", n, "", size_of::<GraphNodeLaunchData>()),
        ];
        let asked: Vec<(&str, &str, &str)> = fields.iter().map(|(k, t, f, _)| (*k, *t, *f)).collect();
        let c = c_layout(&asked);
        let rust: Vec<(String, usize)> = fields.iter().map(|(k, .., v)| (k.to_string(), *v)).collect();
        assert_eq!(rust, c);
    }
}
