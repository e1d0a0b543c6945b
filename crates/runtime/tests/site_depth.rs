//! The capture depth is process-wide, so it is tested alone in its own binary.

use gpusan_runtime::registry::{capture_site, configure_sites, site_addresses, SiteConfig};

#[inline(never)]
fn deep(n: u32) -> Vec<u64> {
    if n == 0 {
        site_addresses(capture_site(0))
    } else {
        let v = deep(n - 1);
        std::hint::black_box(v)
    }
}

#[test]
fn depth_bounds_each_capture() {
    configure_sites(SiteConfig { depth: 3, ..SiteConfig::default() });
    assert_eq!(deep(10).len(), 3);
    configure_sites(SiteConfig { depth: 40, ..SiteConfig::default() });
    let long = deep(10);
    assert!(long.len() > 11, "{}", long.len());
    configure_sites(SiteConfig { depth: 1000, ..SiteConfig::default() });
    assert!(deep(100).len() == SiteConfig::MAX_DEPTH, "clamped");
    configure_sites(SiteConfig { depth: 16, max_sites: 0 });
    assert_eq!(capture_site(0), gpusan_runtime::registry::SiteId::UNKNOWN, "no room for new sites");
}
