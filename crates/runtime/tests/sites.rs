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

#[inline(never)]
fn helper_outside(own: std::ops::Range<u64>) -> SiteId {
    std::hint::black_box(gpusan_runtime::registry::capture_site_outside(own))
}

/// A stack captured from inside an injected library starts at its first frame outside that
/// library's code: only the leading frames in the range are left out.
#[test]
fn a_site_outside_a_range_starts_at_the_first_frame_beyond_it() {
    // The same call, first with nothing left out, then leaving out its first frame's code,
    // then a later frame's only.
    let mut stacks: Vec<Vec<u64>> = Vec::new();
    for round in 0..3 {
        let own = match round {
            0 => 0..0,
            1 => stacks[0][0]..stacks[0][0] + 1,
            _ => stacks[0][1]..stacks[0][1] + 1,
        };
        stacks.push(site_addresses(helper_outside(own)));
    }
    let n = stacks[0].len();
    assert!(n > 2, "{stacks:x?}");
    assert_eq!(stacks[1][..n - 1], stacks[0][1..], "{stacks:x?}");
    assert_eq!(stacks[2], stacks[0], "{stacks:x?}");
    let names = function_names(helper_outside(stacks[0][0]..stacks[0][0] + 1));
    assert!(!names.iter().any(|n| n.contains("helper_outside")), "{names:#?}");
}
