//! Call sites: cheap captures of raw return addresses, interned, symbolized on demand.

use gpusan_runtime::registry::{capture_site, site_addresses, symbolize, SiteId};

// `black_box` after the capture keeps it from being a tail call, which would drop the
// helper's own frame in optimized builds.
#[inline(never)]
fn nested_allocation_site() -> SiteId {
    std::hint::black_box(capture_site(0))
}

#[inline(never)]
fn helper_that_skips_itself() -> SiteId {
    std::hint::black_box(capture_site(1))
}

fn function_names(site: SiteId) -> Vec<String> {
    symbolize(site).into_iter().map(|f| f.function.unwrap_or_default()).collect()
}

#[test]
fn a_site_names_the_function_that_captured_it() {
    let site = nested_allocation_site();
    assert_ne!(site, SiteId::UNKNOWN);
    let names = function_names(site);
    assert!(names[0].ends_with("nested_allocation_site"), "{names:#?}");
    assert!(names.iter().any(|n| n.ends_with("a_site_names_the_function_that_captured_it")), "{names:#?}");
    let frames = symbolize(site);
    assert!(frames[0].file.as_deref().is_some_and(|f| f.ends_with("sites.rs")), "{frames:#?}");
    assert!(frames[0].line.is_some());
    assert_eq!(frames[0].address, site_addresses(site)[0]);
}

#[test]
fn skip_frames_starts_further_up() {
    let names = function_names(helper_that_skips_itself());
    assert!(names[0].ends_with("skip_frames_starts_further_up"), "{names:#?}");
    assert!(!names.iter().any(|n| n.contains("helper_that_skips_itself")), "{names:#?}");
}

#[test]
fn identical_stacks_share_one_id() {
    // An opaque trip count, or an optimizer unrolls the loop into three call sites.
    let ids: Vec<SiteId> = (0..std::hint::black_box(3)).map(|_| nested_allocation_site()).collect();
    assert!(ids.iter().all(|&id| id == ids[0]), "{ids:?}");
    let elsewhere = nested_allocation_site();
    assert_ne!(ids[0], elsewhere, "another call line is another site");
    assert_ne!(site_addresses(ids[0]), site_addresses(elsewhere));
}

#[test]
fn unknown_sites_symbolize_to_nothing() {
    assert!(symbolize(SiteId::UNKNOWN).is_empty());
    assert!(site_addresses(SiteId::from_raw(u32::MAX)).is_empty());
}
