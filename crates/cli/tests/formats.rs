//! The report formats of `gpusan run` and how they are delivered, with the fake driver:
//! the JSON report's published schema (`gpusan schema`, `schemas/report-v1.json`), SARIF
//! 2.1.0 (`--report-sarif`, validated against our own statement of SARIF 2.1.0's requirements in tests/sarif/), JUnit
//! XML (`--report-junit`), and findings shown while the program runs.

mod fake_driver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fake_driver::schema::{assert_matches_schema, published_schema_path, schema_errors};
use fake_driver::Outcome;
use serde_json::Value;

/// The fake driver and prog.c, built once.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| fake_driver::build("formats", &[("prog", "prog.c")]))
}

fn prog() -> String {
    dir().join("prog").display().to_string()
}

/// `gpusan run OPTIONS -- prog link SCENARIO`, its instrumented modules cached in the test's
/// folder.
fn run(options: &[&str], scenario: &str) -> Outcome {
    let cache = dir().join("cache");
    fake_driver::gpusan_run(dir(), options, &[&prog(), "link", scenario], &[("GPUSAN_CACHE_DIR", &cache)])
}

/// A file of the test's folder, made unique per call.
fn out_file(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir().join(format!("{n}-{name}"))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// `gpusan schema` prints the schema published in the repository; `BLESS=1` rewrites the
/// published copy (a change there is a change of the report's interface: review it).
#[test]
fn the_published_schema_is_what_gpusan_schema_prints() {
    let out = Command::new(env!("CARGO_BIN_EXE_gpusan")).arg("schema").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8(out.stdout).unwrap();
    let path = published_schema_path();
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &printed).unwrap();
    }
    let published = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(printed == published, "{} is not what `gpusan schema` prints: run with BLESS=1", path.display());
    let schema: Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert!(schema["required"].as_array().unwrap().contains(&"schema_version".into()));
}

/// The reports of the fake-driver tests all pass through the schema; it is strict enough
/// to refuse a report whose fields are of the wrong kind, missing, or of another version.
#[test]
fn reports_match_the_schema_and_a_damaged_one_does_not() {
    let o = run(&["--leak-check", "full"], "memcpy_overflow");
    assert_eq!(o.kinds(), vec!["memcpy_out_of_bounds"], "{:#}", o.report);
    assert_eq!(o.report["schema_version"], 1);
    assert_matches_schema(&o.report);
    let damaged = |f: &dyn Fn(&mut Value)| {
        let mut r = o.report.clone();
        f(&mut r);
        schema_errors(&r)
    };
    assert!(!damaged(&|r| r["errors"][0]["details"]["address"] = 4096.into()).is_empty());
    assert!(!damaged(&|r| r["errors"][0]["kind"] = "no_such_kind".into()).is_empty());
    assert!(!damaged(&|r| r["schema_version"] = 2.into()).is_empty());
    assert!(!damaged(&|r| drop(r.as_object_mut().unwrap().remove("schema_version"))).is_empty());
    assert!(!damaged(&|r| drop(r["errors"][0]["details"].as_object_mut().unwrap().remove("origin"))).is_empty());
}

fn sarif_validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        // Our own statement of SARIF 2.1.0's requirements on what gpusan writes (see its
        // $comment); OASIS's schema itself is not copied into the repository.
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sarif/sarif-2.1.0-subset.json");
        jsonschema::validator_for(&read_json(&path)).expect("the SARIF requirements schema")
    })
}

/// `gpusan run OPTIONS --report-sarif … -- prog link SCENARIO`: the outcome and the SARIF
/// log, which must be valid SARIF 2.1.0.
fn sarif_of(options: &[&str], scenario: &str) -> (Outcome, Value) {
    let file = out_file("report.sarif");
    let mut all = options.to_vec();
    all.extend(["--report-sarif", file.to_str().unwrap()]);
    let o = run(&all, scenario);
    let sarif = read_json(&file);
    let errors: Vec<String> =
        sarif_validator().iter_errors(&sarif).map(|e| format!("{}: {e}", e.instance_path())).collect();
    assert!(errors.is_empty(), "not SARIF 2.1.0:\n{}\n{sarif:#}", errors.join("\n"));
    (o, sarif)
}

/// A kernel's finding: one result, its rule the kind, its location the device source line
/// and the kernel, its text the finding's.
#[test]
fn sarif_has_a_result_per_finding_located_at_its_source_line() {
    let (o, sarif) = sarif_of(&["--mode", "check"], "checked_kernel");
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "gpusan");
    assert_eq!(run["tool"]["driver"]["rules"][0]["id"], "out_of_bounds_write");
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{sarif:#}");
    let r = &results[0];
    assert_eq!(r["ruleId"], "out_of_bounds_write");
    assert_eq!(r["level"], "error");
    assert!(r["message"]["text"].as_str().unwrap().starts_with("Out-of-bounds __global__ write"), "{r:#}");
    let location = &r["locations"][0];
    assert_eq!(location["physicalLocation"]["artifactLocation"]["uri"], "checked.cu", "{r:#}");
    assert_eq!(location["physicalLocation"]["region"]["startLine"], 21);
    assert_eq!(location["logicalLocations"][0]["fullyQualifiedName"], "zeta");
    // The notes (what the run could not see) go with the invocation.
    let notes = run["invocations"][0]["toolExecutionNotifications"].to_string();
    assert!(notes.contains("runtime API errors were not observed"), "{notes}");
}

/// Host findings and leaks each get a result; a clean run has none.
#[test]
fn sarif_has_host_findings_and_leaks_and_nothing_for_a_clean_run() {
    let (o, sarif) = sarif_of(&["--leak-check", "full"], "leak");
    assert_eq!(o.kinds(), vec!["leak"], "{:#}", o.report);
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{sarif:#}");
    assert_eq!(results[0]["ruleId"], "leak");
    assert_eq!(results[0]["level"], "warning");
    let (_, sarif) = sarif_of(&[], "double_free");
    assert_eq!(sarif["runs"][0]["results"][0]["ruleId"], "double_free", "{sarif:#}");
    assert!(sarif["runs"][0]["results"][0]["stacks"][0]["frames"].as_array().is_some_and(|f| !f.is_empty()));
    let (_, sarif) = sarif_of(&["--leak-check", "full"], "clean");
    assert_eq!(sarif["runs"][0]["results"], serde_json::json!([]), "{sarif:#}");
}

/// A host finding of a program built with `-g` is located at the call in the program's
/// source (the innermost frame whose file is on this machine), as a `file://` URI.
#[test]
fn sarif_locates_a_host_finding_at_the_programs_source_line() {
    let source = fake_driver::sources().join("prog.c");
    let program = dir().join("prog-g");
    fake_driver::run(
        Command::new("cc")
            .args(["-g", "-O0", "-o"])
            .args([&program, &source])
            .arg("-L")
            .arg(dir())
            .args(["-lcuda", "-ldl", "-lpthread"])
            .arg(format!("-Wl,-rpath,{}", dir().display())),
    );
    let text = std::fs::read_to_string(&source).unwrap();
    let branch = text.find("\"memcpy_overflow\")").unwrap();
    let call = branch + text[branch..].find("htod(a, host, 1028);").unwrap();
    let line = text[..call].lines().count();
    let file = out_file("report.sarif");
    let options = ["--report-sarif", file.to_str().unwrap()];
    let o = fake_driver::gpusan_run(dir(), &options, &[program.to_str().unwrap(), "link", "memcpy_overflow"], &[]);
    assert_eq!(o.kinds(), vec!["memcpy_out_of_bounds"], "{:#}", o.report);
    let sarif = read_json(&file);
    let location = &sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"];
    let uri = location["artifactLocation"]["uri"].as_str().unwrap_or_default();
    assert!(uri.starts_with("file:///") && uri.ends_with("/tests/fake_cuda/prog.c"), "{sarif:#}");
    assert_eq!(location["region"]["startLine"], line, "{sarif:#}");
}

fn fingerprints(sarif: &Value) -> Vec<String> {
    sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["partialFingerprints"]["gpusanFinding/v1"].as_str().unwrap().to_string())
        .collect()
}

/// The same bug found by two runs has the same fingerprint, although its addresses (the
/// program's, under address-space randomization, and the device's) differ; another bug
/// has another.
#[test]
fn sarif_fingerprints_are_stable_across_runs() {
    let (a, first) = sarif_of(&[], "memcpy_overflow");
    let (b, second) = sarif_of(&[], "memcpy_overflow");
    assert_eq!(fingerprints(&first).len(), 1);
    assert_eq!(fingerprints(&first), fingerprints(&second));
    let frames = |o: &Outcome| o.report["errors"][0]["details"]["call_stack"].clone();
    let addresses =
        |o: &Outcome| -> Vec<Value> { frames(o).as_array().unwrap().iter().map(|f| f["address"].clone()).collect() };
    assert_ne!(addresses(&a), addresses(&b), "the runs' frames were at the same addresses: the test proves nothing");
    let (_, other) = sarif_of(&[], "memset_overflow");
    assert_ne!(fingerprints(&first), fingerprints(&other));
    let (_, kernel) = sarif_of(&["--mode", "check"], "checked_kernel");
    let (_, again) = sarif_of(&["--mode", "check"], "checked_kernel");
    assert_eq!(fingerprints(&kernel), fingerprints(&again));
}

/// An XML element: its name, its attributes, and the text directly inside it.
type Element = (String, Vec<(String, String)>, String);

/// `gpusan run OPTIONS --report-junit … -- prog link SCENARIO`: the JUnit XML, checked to
/// be well-formed, as (element, attributes, text inside) in document order.
fn junit_of(options: &[&str], scenario: &str) -> (Outcome, Vec<Element>) {
    let file = out_file("junit.xml");
    let mut all = options.to_vec();
    all.extend(["--report-junit", file.to_str().unwrap()]);
    let o = run(&all, scenario);
    let xml = std::fs::read_to_string(&file).unwrap();
    (o, parse_xml(&xml))
}

/// Every element of `xml` with its attributes and text, failing on anything not
/// well-formed (mismatched or unclosed tags, bad escapes, text outside the root).
fn parse_xml(xml: &str) -> Vec<Element> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    reader.config_mut().check_end_names = true;
    let (mut elements, mut open, mut roots) = (Vec::new(), Vec::<usize>::new(), 0);
    loop {
        let event = reader
            .read_event()
            .unwrap_or_else(|e| panic!("not well-formed at {}: {e}\n{xml}", reader.buffer_position()));
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                if open.is_empty() {
                    roots += 1;
                }
                let name = e.name().as_ref().to_string();
                let attrs = e
                    .attributes()
                    .map(|a| {
                        let a = a.unwrap_or_else(|e| panic!("bad attribute: {e}\n{xml}"));
                        let value = a.normalized_value(XML10).unwrap_or_else(|e| panic!("bad escape: {e}\n{xml}"));
                        (a.key.as_ref().to_string(), value.into_owned())
                    })
                    .collect();
                elements.push((name, attrs, String::new()));
                if matches!(event, Event::Start(_)) {
                    open.push(elements.len() - 1);
                }
            }
            Event::End(_) => {
                open.pop().expect("an end tag without a start");
            }
            Event::Text(t) => {
                let text = t.xml_content(XML10);
                match open.last() {
                    Some(&i) => elements[i].2.push_str(&text),
                    None => assert!(text.trim().is_empty(), "text outside the root: {text:?}"),
                }
            }
            Event::GeneralRef(r) => {
                let text = match r.resolve_char_ref().unwrap_or_else(|e| panic!("bad reference: {e}\n{xml}")) {
                    Some(c) => c.to_string(),
                    None => {
                        let name = r.xml_content(XML10);
                        let known = quick_xml::escape::resolve_predefined_entity(&name);
                        known.unwrap_or_else(|| panic!("unknown entity &{name};\n{xml}")).to_string()
                    }
                };
                if let Some(&i) = open.last() {
                    elements[i].2.push_str(&text);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(open.is_empty(), "unclosed elements\n{xml}");
    assert_eq!(roots, 1, "one root element\n{xml}");
    elements
}

const XML10: quick_xml::XmlVersion = quick_xml::XmlVersion::Implicit1_0;

fn attr<'a>(element: &'a Element, name: &str) -> &'a str {
    element.1.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("")
}

/// One test case per kernel launched and one for the host side; a kernel's findings are
/// its case's failure, with their text; the counts add up.
#[test]
fn junit_has_a_case_per_kernel_and_failures_carry_the_findings() {
    let (o, xml) = junit_of(&["--mode", "check"], "checked_kernel");
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    let cases: Vec<usize> = (0..xml.len()).filter(|&i| xml[i].0 == "testcase").collect();
    let kernel = cases.iter().copied().find(|&i| attr(&xml[i], "name") == "zeta").expect("zeta's case");
    assert_eq!(attr(&xml[kernel], "classname"), "gpusan.kernel", "{xml:?}");
    let failure = &xml[kernel + 1];
    assert_eq!(failure.0, "failure", "{xml:?}");
    assert_eq!(attr(failure, "type"), "out_of_bounds_write");
    assert!(attr(failure, "message").starts_with("Out-of-bounds __global__ write"), "{failure:?}");
    assert!(failure.2.contains("at zeta") && failure.2.contains("checked.cu:21"), "{}", failure.2);
    let host = cases.iter().copied().find(|&i| attr(&xml[i], "classname") == "gpusan.host").expect("a host case");
    assert!(xml.get(host + 1).is_none_or(|e| e.0 == "testcase" || e.0 == "system-out"), "host case failed: {xml:?}");
    let suites = &xml[0];
    assert_eq!(suites.0, "testsuites");
    assert_eq!(attr(suites, "tests"), cases.len().to_string());
    assert_eq!(attr(suites, "failures"), "1");
}

/// Host findings fail the host case; a clean run has no failure; text that XML must escape
/// stays well-formed (the notes carry quotes and ampersands' kin).
#[test]
fn junit_host_findings_and_a_clean_run() {
    let (_, xml) = junit_of(&["--leak-check", "full"], "double_free");
    let failures: Vec<_> = xml.iter().filter(|e| e.0 == "failure").collect();
    assert_eq!(failures.len(), 1, "{xml:?}");
    assert_eq!(attr(failures[0], "type"), "double_free");
    let (_, xml) = junit_of(&["--leak-check", "full"], "clean");
    assert!(xml.iter().all(|e| e.0 != "failure"), "{xml:?}");
    assert_eq!(attr(&xml[0], "failures"), "0");
}

/// A finding is shown when it is found: the program errs, sleeps, then prints; the
/// finding's text comes first on standard error, once, and the final report still ends in
/// its summary, while the JSON holds the whole run.
#[test]
fn findings_are_shown_while_the_program_runs() {
    let o = run(&[], "overflow_then_sleep");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let headline = o.report["errors"][0]["message"].as_str().expect("a finding").to_string();
    let shown = o.stderr.find(&headline).unwrap_or_else(|| panic!("{headline:?} not shown:\n{}", o.stderr));
    let later = o.stderr.find("program: later output").expect("the program's output");
    assert!(shown < later, "the finding was shown only after the program's later output:\n{}", o.stderr);
    assert_eq!(o.stderr.matches(&headline).count(), 1, "shown twice:\n{}", o.stderr);
    assert!(o.stderr.contains("ERROR SUMMARY: 1 error"), "{}", o.stderr);
    assert_eq!(o.report["summary"]["total"], 1);
    assert_eq!(o.report["errors"].as_array().unwrap().len(), 1);
}

/// The streamed text reads as one report: its header line first, once, then the finding,
/// then the rest of the report (the summary last), on standard error and in a log file.
#[test]
fn the_report_header_comes_before_the_streamed_findings_once() {
    let header = "========= GPUSAN ";
    let in_order = |text: &str, headline: &str| {
        assert_eq!(text.matches(header).count(), 1, "one header:\n{text}");
        let (h, f, s) = (text.find(header), text.find(headline), text.find("ERROR SUMMARY: 1 error"));
        assert!(h.is_some() && f.is_some() && s.is_some(), "{headline:?}:\n{text}");
        assert!(h < f && f < s, "header, finding, summary:\n{text}");
    };
    let o = run(&[], "overflow_then_sleep");
    let headline = o.report["errors"][0]["message"].as_str().expect("a finding").to_string();
    in_order(&o.stderr, &headline);
    let log = out_file("header-log.txt");
    run(&["--log-file", log.to_str().unwrap()], "overflow_then_sleep");
    in_order(&std::fs::read_to_string(&log).unwrap(), &headline);
    // Nothing streamed: the header is the final report's own, once.
    let clean = run(&[], "clean");
    assert_eq!(clean.stderr.matches(header).count(), 1, "{}", clean.stderr);
}

/// `gpusan report show FILE` prints a saved `--report-json` as `gpusan run` printed it: the
/// same lines (a run prints its streamed findings before the notes), from the same renderer
/// and options; a file that is no report is an error naming it.
#[test]
fn report_show_prints_a_saved_report_as_the_run_did() {
    let gpusan = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_gpusan")).args(args).output().unwrap();
    for (options, scenario) in
        [(&[][..], "checked_kernel"), (&["--demangle", "no", "--print-limit", "1"][..], "overflow_then_sleep")]
    {
        let o = run(options, scenario);
        assert!(o.report["summary"]["total"].as_u64().unwrap() > 0, "{:#}", o.report);
        let saved = out_file("saved.json");
        std::fs::write(&saved, serde_json::to_string_pretty(&o.report).unwrap()).unwrap();
        let mut args = vec!["report", "show", saved.to_str().unwrap()];
        args.extend_from_slice(options);
        let out = gpusan(&args);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let shown = String::from_utf8(out.stdout).unwrap();
        let from_run = &o.stderr[o.stderr.find("========= GPUSAN").expect("the run's report")..];
        let mut a: Vec<&str> = shown.lines().collect();
        let mut b: Vec<&str> = from_run.lines().filter(|l| l.starts_with("=========")).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "{options:?} {scenario}: report show:\n{shown}\ngpusan run:\n{from_run}");
    }
    let junk = out_file("junk.json");
    std::fs::write(&junk, "{\"tool\": 1}").unwrap();
    let out = gpusan(&["report", "show", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is no gpusan JSON report"));
}

/// With `--log-file` the findings stream into the file, and the file holds each once.
#[test]
fn findings_stream_into_the_log_file_once() {
    let log = out_file("log.txt");
    let o = run(&["--log-file", log.to_str().unwrap()], "overflow_then_sleep");
    let text = std::fs::read_to_string(&log).unwrap();
    let headline = o.report["errors"][0]["message"].as_str().expect("a finding").to_string();
    assert_eq!(text.matches(&headline).count(), 1, "{text}");
    assert!(text.contains("ERROR SUMMARY: 1 error"), "{text}");
    assert!(!o.stderr.contains(&headline), "{}", o.stderr);
}

/// Output captured by a test (no terminal) never gets the progress line, nor does the
/// injected library leave progress files behind for it.
#[test]
fn captured_output_has_no_progress_line() {
    let o = run(&["--mode", "check"], "checked_kernel");
    assert_eq!(o.kinds(), vec!["out_of_bounds_write"], "{:#}", o.report);
    assert!(!o.stderr.contains("instrumenting") && !o.stderr.contains('\r'), "{}", o.stderr);
}

/// The SARIF requirements refuse what SARIF 2.1.0 forbids: a result without a message, a
/// level outside its four, another version, a physical location with neither artifact nor
/// address.
#[test]
fn the_sarif_requirements_refuse_invalid_logs() {
    let ok = serde_json::json!({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "gpusan"}},
        "results": [{"ruleId": "r", "level": "error", "message": {"text": "m"},
                     "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.cu"}, "region": {"startLine": 3}}}]}]}]});
    assert!(sarif_validator().is_valid(&ok));
    let damaged = |f: &dyn Fn(&mut Value)| {
        let mut v = ok.clone();
        f(&mut v);
        sarif_validator().is_valid(&v)
    };
    assert!(!damaged(&|v| drop(v["runs"][0]["results"][0].as_object_mut().unwrap().remove("message"))));
    assert!(!damaged(&|v| v["runs"][0]["results"][0]["level"] = "fatal".into()));
    assert!(!damaged(&|v| v["version"] = "2.0.0".into()));
    assert!(!damaged(&|v| v["runs"][0]["results"][0]["locations"][0]["physicalLocation"] = serde_json::json!({})));
    assert!(!damaged(
        &|v| v["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0.into()
    ));
}

/// On a terminal, instrumentation that takes longer than a second shows the progress line
/// (naming what is being instrumented and for how long), and the line goes when it is done:
/// the program below plays the injected library's part, leaving a progress file for 2.5 s.
/// `script` gives `gpusan run` a terminal.
#[test]
fn a_terminal_shows_the_progress_line_while_instrumentation_lasts() {
    let program = r#"f="$GPUSAN_REPORT_DIR/report-$$.json.progress"; echo instrumenting big.ptx > "$f"; sleep 2.5; rm -f "$f"; echo program-done"#;
    let inner = format!("{} run --mode api -- sh -c '{program}'", env!("CARGO_BIN_EXE_gpusan"));
    let out = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("GPUSAN_INJECT_LIB", fake_driver::inject_lib())
        .env("LD_LIBRARY_PATH", dir())
        .output()
        .expect("script(1) from util-linux runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("gpusan: instrumenting big.ptx (1 s)"), "{text}");
    // The line is cleared (`ESC[2K`) after its last drawing and before the report, and never
    // drawn again: the spinner may still tick once after the program's last output, until
    // the next poll finds the progress file gone.
    let header = text.find("========= GPUSAN").expect(&text);
    let last = text[..header].rfind("instrumenting big.ptx").expect(&text);
    assert!(text[last..header].contains("\x1b[2K"), "{text}");
    assert!(!text[header..].contains("instrumenting big.ptx"), "{text}");
}
