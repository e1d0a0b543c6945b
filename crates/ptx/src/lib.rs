//! gpusan's PTX front-end: lexer, parser, syntax tree, printer, control-flow graph and
//! dataflow. It knows nothing about safety; the passes in `gpusan-passes` build on it.
//!
//! ```
//! let src = ".version 9.0\n.target sm_90\n.address_size 64\n\
//!            .visible .entry k(.param .u64 p)\n{\n\tret;\n}\n";
//! let module = gpusan_ptx::parse(src).unwrap();
//! let text = gpusan_ptx::print(&module);
//! assert_eq!(gpusan_ptx::print(&gpusan_ptx::parse(&text).unwrap()), text);
//! ```

pub mod ast;
pub mod cfg;
pub mod dataflow;
pub mod excerpt;
pub mod lexer;
pub mod parser;
pub mod printer;
mod runs;
pub mod semantics;

pub use ast::Module;
pub use parser::{parse, Items, ParseError, MAX_REGISTER_COUNT, MAX_VARIABLE_BYTES};
pub use printer::print;
