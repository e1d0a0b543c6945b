fn main() {
    let path = std::env::args().nth(1).unwrap();
    let src = std::fs::read_to_string(&path).unwrap();
    let m = match gpusan_ptx::parse(&src) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{}", e.with_path(path));
            std::process::exit(1)
        }
    };
    let a = gpusan_ptx::print(&m);
    let b = gpusan_ptx::print(&gpusan_ptx::parse(&a).unwrap());
    assert_eq!(a, b, "unstable");
    print!("{a}");
}
