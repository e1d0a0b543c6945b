# The fuzz targets and the libFuzzer options each runs with; sourced by scripts/fuzz-build.sh,
# scripts/fuzz.sh, scripts/fuzz-ci.sh and bench/fuzz-long.sh (which runs without Rust, so
# this is plain bash).

# Every target of fuzz/Cargo.toml.
FUZZ_ALL_TARGETS=(parse lex fatbin check count rewrite meta report records trace)

# Options of every run: an input running past 10 s is a hang and a resident size past
# 2 GiB (checked every second; the malloc limit acts only under a sanitizer's allocator) is
# out of memory, each a failure with its input saved.
FUZZ_COMMON_OPTIONS=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1)

# fuzz_options TARGET DICT_DIR: the target's own options: the largest input libFuzzer
# builds and the dictionary (DICT_DIR holds ptx.dict and report.dict). Text targets reach 256 KiB, past
# the lines of 65,536 columns and more where a located error once panicked.
fuzz_options() {
  case $1 in
    parse | lex | check | count | rewrite) echo "-max_len=262144 -dict=$2/ptx.dict" ;;
    meta) echo "-max_len=65536 -dict=$2/ptx.dict" ;;
    report) echo "-max_len=65536 -dict=$2/report.dict" ;;
    records | trace) echo "-max_len=65536" ;;
    fatbin) echo "-max_len=262144" ;;
    *)
      echo "fuzz: unknown target $1" >&2
      return 1
      ;;
  esac
}
