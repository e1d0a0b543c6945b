//! Build-time instrumentation as users run it, with the pinned CUDA toolchain:
//! `gpusan instrument`, the `ptxas` stand-in under nvcc (through `gpusan nvcc-env`) and
//! under Triton's ptxas command line, and its refusals.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GPUSAN: &str = env!("CARGO_BIN_EXE_gpusan");

/// A fresh folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gpusan-build-time-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

/// The pinned toolkit's top folder (holding bin/nvcc).
fn cuda() -> PathBuf {
    gpusan_testkit::cuda_bin().parent().unwrap().to_path_buf()
}

/// The ELF symbols of a cubin, or of the cubins in a fatbin-carrying object.
fn elf_symbols(file: &Path) -> String {
    let out = run(Command::new(gpusan_testkit::cuda_tool("cuobjdump")).arg("-elf").arg(file));
    assert!(out.status.success(), "cuobjdump -elf {}: {}", file.display(), text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_declares_abi(symbols: &str, what: &str) {
    for name in ["__gpusan_table", "__gpusan_errors", "__gpusan_module"] {
        assert!(symbols.contains(name), "{what} lacks {name}:\n{symbols}");
    }
}

const BAD: &str = ".version 9.0\n.target sm_90\n.address_size 64\n\n.visible .entry k(.param .u64 p)\n{\n\
                   \t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\tst.global.u32 [%rd1], 0;\n\tret\n}\n";

#[test]
fn instrument_applies_the_check_pass_by_default() {
    let dir = scratch("instrument");
    let input = dir.join("k.ptx");
    std::fs::write(&input, BAD.replace("\tret\n", "\tret;\n")).unwrap();
    let output = dir.join("k.gpusan.ptx");
    let out = run(Command::new(GPUSAN).arg("instrument").arg(&input).arg("-o").arg(&output));
    assert!(out.status.success(), "{}", text(&out));
    let ptx = std::fs::read_to_string(&output).unwrap();
    assert!(ptx.contains("__gpusan_errors"), "{ptx}");
    assert!(text(&out).contains("1 sites instrumented by `check`"), "{}", text(&out));
    // What it wrote is real PTX.
    gpusan_testkit::assemble(&gpusan_testkit::ptxas(), &output, &dir.join("k.cubin")).unwrap();
}

#[test]
fn instrument_refuses_bad_ptx_with_its_location() {
    let dir = scratch("instrument-bad");
    let input = dir.join("bad.ptx");
    std::fs::write(&input, BAD).unwrap();
    let output = dir.join("out.ptx");
    let out = run(Command::new(GPUSAN).arg("instrument").arg(&input).arg("-o").arg(&output));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = text(&out);
    assert!(err.contains("bad.ptx:11:1: expected an operand or `;` ending the instruction, found `}`"), "{err}");
    assert!(err.contains("11 │ }"), "the snippet shows the line:\n{err}");
    assert!(!output.exists(), "no output for refused input");
}

/// nvcc, through the wrapped toolkit `gpusan nvcc-env` makes, embeds instrumented machine
/// code: the cubin declares the device ABI, `-Xptxas -v` still reports, and separately
/// compiled units (`-rdc`) still link.
#[test]
fn nvcc_through_the_wrapped_toolkit_builds_instrumented_cubins() {
    let dir = scratch("nvcc");
    let toolkit = dir.join("toolkit");
    let env = run(Command::new(GPUSAN).args(["nvcc-env", "--cuda"]).arg(cuda()).arg("--dir").arg(&toolkit));
    assert!(env.status.success(), "{}", text(&env));
    let lines = String::from_utf8(env.stdout).unwrap();
    let bin = toolkit.canonicalize().unwrap().join("bin");
    assert!(lines.contains(&format!("export PATH='{}':\"$PATH\"", bin.display())), "{lines}");
    assert!(lines.contains("export GPUSAN_REAL_PTXAS='"), "{lines}");

    // The recipe as a user runs it: the printed lines evaluated by a shell, then plain nvcc.
    let src = dir.join("saxpy.cu");
    std::fs::write(
        &src,
        "__global__ void saxpy(int n, float a, const float *x, float *y) {\n\
         \x20 int i = blockIdx.x * blockDim.x + threadIdx.x;\n\
         \x20 if (i < n) y[i] = a * x[i] + y[i];\n}\n",
    )
    .unwrap();
    let script = format!(
        "set -e\neval \"$1\"\ncd '{}'\ncommand -v nvcc\n\
         nvcc -arch=sm_90 -Xptxas -v -c saxpy.cu -o saxpy.o\nnvcc -arch=sm_90 -cubin saxpy.cu -o saxpy.cubin\n",
        dir.display()
    );
    let out = run(Command::new("bash").arg("-c").arg(&script).arg("recipe").arg(&lines));
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains(&format!("{}/nvcc", bin.display())), "the wrapped nvcc comes first on PATH:\n{log}");
    assert!(log.contains("sites instrumented by `check`"), "the stand-in ran:\n{log}");
    assert!(log.contains("Compiling entry function '_Z5saxpyifPKfPf'") && log.contains("Used "), "ptxas -v:\n{log}");
    assert_declares_abi(&elf_symbols(&dir.join("saxpy.o")), "the object's embedded cubin");
    assert_declares_abi(&elf_symbols(&dir.join("saxpy.cubin")), "the cubin");

    // Without the recipe, the same nvcc builds the kernel unchanged: what the test sees
    // comes from the stand-in.
    let plain = run(Command::new(gpusan_testkit::cuda_tool("nvcc"))
        .args(["-arch=sm_90", "-cubin", "saxpy.cu", "-o", "plain.cubin"])
        .current_dir(&dir));
    assert!(plain.status.success(), "{}", text(&plain));
    assert!(!elf_symbols(&dir.join("plain.cubin")).contains("__gpusan_errors"));

    std::fs::write(dir.join("a.cu"), "__device__ int get(const int *p) { return p[1]; }\n").unwrap();
    std::fs::write(
        dir.join("b.cu"),
        "__device__ int get(const int *p);\n__global__ void k(int *p) { p[0] = get(p); }\n",
    )
    .unwrap();
    let rdc = format!(
        "set -e\neval \"$1\"\ncd '{}'\nnvcc -arch=sm_90 -rdc=true -c a.cu b.cu\nnvcc -arch=sm_90 -dlink a.o b.o -o link.o\n",
        dir.display()
    );
    let out = run(Command::new("bash").arg("-c").arg(&rdc).arg("recipe").arg(&lines));
    assert!(out.status.success(), "separate compilation links:\n{}", text(&out));
    assert_declares_abi(&elf_symbols(&dir.join("link.o")), "the device-linked object");
}

/// Triton 3.6's `make_cubin` command line (third_party/nvidia/backend/compiler.py):
/// `ptxas -lineinfo [--fmad=false] -v [--opt-level 0] --gpu-name=sm_90a X.ptx -o X.ptx.o`,
/// on Triton's own sm_90a PTX (TMA and wgmma included), with the stand-in as Triton finds
/// it: `TRITON_PTXAS_PATH` naming a symlink called ptxas.
#[test]
fn triton_command_lines_assemble_instrumented_sm_90a_kernels() {
    let dir = scratch("triton");
    let link = dir.join("bin/ptxas");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(GPUSAN, &link).unwrap();
    // The real ptxas is found on PATH, after the stand-in's own folder (which it skips).
    let path = std::env::join_paths([link.parent().unwrap().to_path_buf(), gpusan_testkit::cuda_bin()]).unwrap();

    let version = run(Command::new(&link).arg("--version").env("PATH", &path).env_remove("GPUSAN_REAL_PTXAS"));
    assert!(version.status.success(), "{}", text(&version));
    let v = String::from_utf8(version.stdout).unwrap();
    // Triton's NvidiaTool reads the version with `.*release (\d+\.\d+).*`.
    assert!(v.contains("Cuda compilation tools, release 13.0"), "{v}");
    assert!(v.contains("ptxas stand-in: PTX instrumented by `check`"), "{v}");

    let corpus = gpusan_testkit::repo_root().join("tests/corpus/triton");
    for (name, extra) in
        [("matmul_tma", &[][..]), ("softmax", &["--fmad=false"][..]), ("layernorm", &["--opt-level", "0"][..])]
    {
        let ptx = dir.join(format!("tmp{name}.ptx"));
        std::fs::copy(corpus.join(format!("{name}.ptx")), &ptx).unwrap();
        assert!(std::fs::read_to_string(&ptx).unwrap().contains(".target sm_90a"));
        let cubin = dir.join(format!("tmp{name}.ptx.o"));
        let out = run(Command::new(&link)
            .arg("-lineinfo")
            .args(extra)
            .arg("-v")
            .arg("--gpu-name=sm_90a")
            .arg(&ptx)
            .arg("-o")
            .arg(&cubin)
            .env("PATH", &path)
            .env_remove("GPUSAN_REAL_PTXAS"));
        let log = text(&out);
        assert!(out.status.success(), "{name}: {log}");
        assert!(log.contains("Compiling entry function") && log.contains("Used "), "{name}: -v output:\n{log}");
        assert_declares_abi(&elf_symbols(&cubin), name);
    }
}

#[test]
fn the_stand_in_refuses_bad_ptx_with_its_location_and_assembles_nothing() {
    let dir = scratch("standin-bad");
    let input = dir.join("bad.ptx");
    std::fs::write(&input, BAD).unwrap();
    let cubin = dir.join("bad.cubin");
    let out = run(Command::new(GPUSAN)
        .args(["ptxas", "-arch=sm_90", "-v"])
        .arg(&input)
        .arg("-o")
        .arg(&cubin)
        .env("GPUSAN_REAL_PTXAS", gpusan_testkit::ptxas()));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = text(&out);
    assert!(err.contains(&format!("{}:11:1: expected an operand", input.display())), "{err}");
    assert!(err.contains("was not assembled"), "{err}");
    assert!(!cubin.exists());
}

#[test]
fn the_stand_in_passes_already_instrumented_ptx_through() {
    let dir = scratch("standin-twice");
    let input = dir.join("k.ptx");
    std::fs::write(&input, BAD.replace("\tret\n", "\tret;\n")).unwrap();
    let once =
        gpusan_passes::instrument(&std::fs::read_to_string(&input).unwrap(), &gpusan_passes::check::Check).unwrap().ptx;
    std::fs::write(&input, &once).unwrap();
    let cubin = dir.join("k.cubin");
    let out = run(Command::new(GPUSAN)
        .args(["ptxas", "-arch=sm_90"])
        .arg(&input)
        .arg("-o")
        .arg(&cubin)
        .env("GPUSAN_REAL_PTXAS", gpusan_testkit::ptxas()));
    assert!(out.status.success(), "{}", text(&out));
    assert_declares_abi(&elf_symbols(&cubin), "the cubin");
}

#[test]
fn the_stand_in_never_runs_itself_as_the_real_ptxas() {
    let dir = scratch("standin-self");
    let link = dir.join("ptxas");
    std::os::unix::fs::symlink(GPUSAN, &link).unwrap();
    let out = run(Command::new(&link).arg("--version").env("GPUSAN_REAL_PTXAS", &link));
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("is gpusan itself"), "{}", text(&out));
    // Found on PATH only as itself: no real ptxas anywhere.
    let out = run(Command::new(&link)
        .arg("--version")
        .env_remove("GPUSAN_REAL_PTXAS")
        .env_remove("CUDA_HOME")
        .env_remove("CUDA_PATH")
        .env("PATH", &dir));
    if !Path::new("/usr/local/cuda/bin/ptxas").exists() {
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out).contains("cannot find NVIDIA's ptxas"), "{}", text(&out));
    }
}

/// Every ptxas option that takes a separate value is known to the stand-in, or it would
/// take that value for an input file.
#[test]
fn the_stand_in_knows_every_ptxas_option_with_a_value() {
    let help = run(Command::new(gpusan_testkit::ptxas()).arg("--help"));
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let source = include_str!("../src/ptxas.rs");
    let mut checked = 0;
    for line in help.lines().filter(|l| l.starts_with("--") && l.contains('<')) {
        let long = line.split_whitespace().next().unwrap();
        let short = line.rsplit_once('(').and_then(|(_, s)| s.split(')').next()).unwrap();
        for name in [long, short] {
            assert!(source.contains(&format!("\"{name}\"")), "VALUE_OPTIONS lacks {name} ({line})");
        }
        checked += 1;
    }
    assert!(checked >= 15, "ptxas --help lists options with values:\n{help}");
}

/// Local bounds reach build-time instrumentation: `gpusan instrument --local-bounds` and
/// the stand-in's `GPUSAN_LOCAL_BOUNDS` (what `gpusan run --local-bounds` sets), so a user
/// can go back to frame bounds for kernels built instrumented too; a bad value is refused.
#[test]
fn local_bounds_reach_build_time_instrumentation() {
    let dir = scratch("local-bounds");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../passes/tests/fixtures/check/onchip/local_objects.ptx");
    let src = std::fs::read_to_string(fixture).unwrap();
    let input = dir.join("k.ptx");
    std::fs::write(&input, src.split(gpusan_testkit::SEPARATOR).next().unwrap()).unwrap();
    // Array `m` at frame offset 64 is held to [64, 128): its lower bound is moved up.
    let object_start = "add.s64 %__gs_wlo, %__gs_wlo, 64;";
    let squeezed = |p: &Path| std::fs::read_to_string(p).unwrap().split_whitespace().collect::<Vec<_>>().join(" ");
    for (flag, object) in [(None, true), (Some("object"), true), (Some("frame"), false)] {
        let output = dir.join("k.gpusan.ptx");
        let mut cmd = Command::new(GPUSAN);
        cmd.arg("instrument").arg(&input).arg("-o").arg(&output);
        if let Some(f) = flag {
            cmd.args(["--local-bounds", f]);
        }
        let out = run(&mut cmd);
        assert!(out.status.success(), "{flag:?}: {}", text(&out));
        assert_eq!(squeezed(&output).contains(object_start), object, "{flag:?}");
    }
    for (value, object) in [("object", true), ("frame", false)] {
        let keep = dir.join(format!("keep-{value}"));
        std::fs::create_dir_all(&keep).unwrap();
        let out = run(Command::new(GPUSAN)
            .args(["ptxas", "-arch=sm_90"])
            .arg(&input)
            .arg("-o")
            .arg(dir.join("k.cubin"))
            .env("GPUSAN_REAL_PTXAS", gpusan_testkit::ptxas())
            .env("GPUSAN_PTXAS_KEEP", &keep)
            .env("GPUSAN_LOCAL_BOUNDS", value));
        assert!(out.status.success(), "{value}: {}", text(&out));
        let kept: Vec<_> = std::fs::read_dir(&keep).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(squeezed(&kept[0]).contains(object_start), object, "{value}");
    }
    let out = run(Command::new(GPUSAN)
        .args(["ptxas", "-arch=sm_90"])
        .arg(&input)
        .arg("-o")
        .arg(dir.join("k.cubin"))
        .env("GPUSAN_REAL_PTXAS", gpusan_testkit::ptxas())
        .env("GPUSAN_LOCAL_BOUNDS", "arrays"));
    assert!(!out.status.success() && text(&out).contains("GPUSAN_LOCAL_BOUNDS=arrays"), "{}", text(&out));
}
