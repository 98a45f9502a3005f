use super::*;

fn dim(text: &str) -> Dim {
    parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn sizes(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

#[test]
fn the_notation_parses_and_prints_back() {
    for text in [
        "n[1..8]{2, 4}",
        "n[1..20][2..10]{4}",
        "n{2, 4}",
        "n[1..8] * 3 + 1",
        "3",
        "b[1..16] * s[1..512]{128} * 64",
        "((s[1..512] + 1) / 2)",
        "min(a[1..8], b[1..8])",
        "n[2..9] - 1",
    ] {
        assert_eq!(dim(text).to_string(), text);
    }
}

#[test]
fn expressions_are_kept_in_one_canonical_form() {
    assert_eq!(dim("(n[1..8] + 1) * 2"), dim("2 * n[1..8] + 2"));
    assert_eq!(dim("(n[1..8] + 1) * 2").to_string(), "n[1..8] * 2 + 2");
    assert_eq!(dim("n[1..8] * m[1..4] - m * n + 5"), Dim::constant(5));
    // floor divisions take out each term's multiple of the divisor
    assert_eq!(dim("(n[1..8] * 4 + 6) / 4").to_string(), "n[1..8] + 1");
    assert_eq!(dim("(n[1..8] * 3 + 1) / 2").to_string(), "n[1..8] + ((n + 1) / 2)");
    assert_eq!(dim("(12 + 7) / 4"), Dim::constant(4));
    // a later bare use is the same symbol, with the constraints of the first
    assert_eq!(dim("n[1..8] + n").to_string(), "n[1..8] * 2");
    // the ranges decide a minimum where they do not overlap, else it stays
    assert_eq!(dim("min(a[1..4], b[8..16])").to_string(), "a[1..4]");
    assert_eq!(dim("max(a[1..4], b[8..16])").to_string(), "b[8..16]");
    assert_eq!(dim("max(a[1..8], b[4..16])").to_string(), "max(a[1..8], b[4..16])");
}

#[test]
fn ranges_combine_through_the_arithmetic() {
    assert_eq!(dim("n[1..8] * 3 + 1").bounds(), (4, 25));
    assert_eq!(dim("b[1..16] * s[1..512]").bounds(), (1, 8192));
    assert_eq!(dim("(s[1..512] + 1) / 2").bounds(), (1, 256));
    assert_eq!(dim("n[1..20][2..10]").bounds(), (2, 10));
    // a symbol without a range of its own
    assert_eq!(dim("n{2, 4}").bounds(), (1, DEFAULT_MAX as i64));
    // two uses of a name with different constraints: both hold
    let a = dim("n[1..20]");
    let b = dim("n[2..10]{4}");
    let sum = a.add(&b).unwrap();
    assert_eq!(sum.to_string(), "n[1..20][2..10]{4} * 2");
    assert_eq!(sum.bounds(), (4, 20));
    // the cost model's point: the first optimal, else the middle of the range
    let point = dim("b[1..16]{1, 8} * s[1..512]").cost_point();
    assert_eq!(point, sizes(&[("b", 1), ("s", 256)]));
}

#[test]
fn a_dimension_evaluates_at_sizes_in_range_and_refuses_others() {
    let d = dim("n[1..8] * 3 + 1");
    assert_eq!(d.eval(&sizes(&[("n", 7)])), Ok(22));
    assert_eq!(
        d.eval(&sizes(&[("n", 9)])).unwrap_err().to_string(),
        "n is 9, outside its range [1..8]"
    );
    assert_eq!(
        d.eval(&BTreeMap::new()).unwrap_err().to_string(),
        "no size is given for n"
    );
}

#[test]
fn what_an_op_requires_is_proven_or_refused_naming_the_dimension() {
    dim("s[1..512] * 8").require_divisible(8).unwrap();
    dim("s[1..512] * 16 + 24").require_divisible(8).unwrap();
    Dim::constant(768).require_divisible(64).unwrap();
    assert_eq!(
        dim("s[1..512]").require_divisible(8).unwrap_err().to_string(),
        "a dimension must be divisible by 8 here, and s[1..512] is not"
    );
    dim("n[3..8] - 2").require_at_least(1, "a window").unwrap();
    assert_eq!(
        dim("n[1..8] - 1")
            .require_at_least(1, "the output of a 2x2 window")
            .unwrap_err()
            .to_string(),
        "the output of a 2x2 window must be at least 1, and n[1..8] - 1 ranges over [0..7]"
    );
    let n = dim("n[1..8]");
    assert_eq!(
        Dim::constant(2).sub(&n).unwrap_err().to_string(),
        "a difference of sizes must be at least 0, and -n[1..8] + 2 ranges over [-6..1]"
    );
}

#[test]
fn malformed_expressions_are_refused_saying_where_and_why() {
    for (text, message) in [
        ("n[8..1]", "`n[8..1]`, column 1: symbol n: the range [8..1] is empty"),
        (
            "n[1..4][6..8]",
            "`n[1..4][6..8]`, column 1: symbol n: its ranges [1..4][6..8] leave no size",
        ),
        (
            "n[1..8]{9}",
            "`n[1..8]{9}`, column 1: symbol n: the optimal size 9 is outside [1..8]",
        ),
        ("n[1..8] / m", "`n[1..8] / m`, column 9: only a number divides a size"),
        ("n[1..8] / 0", "`n[1..8] / 0`, column 9: n[1..8] divided by 0"),
        ("n[1.8]", "`n[1.8]`, column 4: expected `..` between a range's ends"),
        (
            "n +",
            "`n +`, column 4: expected a number, a symbol, `(`, `min(` or `max(`",
        ),
        ("(n", "`(n`, column 3: expected `)`"),
        ("n n", "`n n`, column 3: expected `+`, `-`, `*`, `/` or the end"),
        (
            "1 - n[1..8]",
            "`1 - n[1..8]`, column 1: it ranges over [-7..0]: a size cannot be negative",
        ),
    ] {
        assert_eq!(parse(text).unwrap_err().to_string(), message, "{text}");
    }
}

#[test]
fn onnx_names_become_identifiers() {
    assert_eq!(symbol_name("batch.size"), "batch_size");
    assert_eq!(symbol_name("2d"), "_2d");
    assert_eq!(symbol_name("seq-len"), "seq_len");
    assert_eq!(unnamed_axis("0", 0), "_0_d0");
    assert_eq!(unnamed_axis("input_ids", 1), "_input_ids_d1");
    assert!(is_identifier(&symbol_name("a b.c")));
}
