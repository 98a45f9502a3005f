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

fn dims(texts: &[&str]) -> Vec<Dim> {
    texts.iter().map(|t| dim(t)).collect()
}

fn shown(ds: &[Dim]) -> Vec<String> {
    ds.iter().map(Dim::to_string).collect()
}

#[test]
fn broadcasting_and_products_need_provably_equal_sizes() {
    use infer::{broadcast, matmul};
    let out = broadcast(&dims(&["b[1..16]", "s[1..512]", "1"]), &dims(&["1", "768"])).unwrap();
    assert_eq!(shown(&out), ["b[1..16]", "s[1..512]", "768"]);
    assert_eq!(
        broadcast(&dims(&["s[1..512]"]), &dims(&["t[1..512]"]))
            .unwrap_err()
            .to_string(),
        "[s[1..512]] and [t[1..512]] do not broadcast: s[1..512] and t[1..512] are not the same size, and neither is 1"
    );
    let out = matmul(&dims(&["b[1..8]", "s[1..512]", "256"]), &dims(&["256", "1024"])).unwrap();
    assert_eq!(shown(&out), ["b[1..8]", "s[1..512]", "1024"]);
    // attention's scores: s x d times d x s
    let scores = matmul(&dims(&["s[1..512]", "64"]), &dims(&["64", "s[1..512]"])).unwrap();
    assert_eq!(shown(&scores), ["s[1..512]", "s[1..512]"]);
    assert_eq!(
        matmul(&dims(&["s[1..512]", "64"]), &dims(&["32", "8"]))
            .unwrap_err()
            .to_string(),
        "[s[1..512], 64] times [32, 8]: 64 columns and 32 rows are not the same size"
    );
}

#[test]
fn windows_give_their_positions_and_refuse_an_input_too_small() {
    use infer::{window, Window};
    let w = |kernel, stride, pads, ceil| Window {
        kernel,
        stride,
        dilation: 1,
        pad_begin: pads,
        pad_end: pads,
        ceil,
    };
    // a 7x7 stride-2 convolution padded by 3, as ResNet's first
    let out = window(&dim("h[32..1024]"), &w(7, 2, 3, false)).unwrap();
    assert_eq!(out.to_string(), "((h[32..1024] + 1) / 2)");
    assert_eq!(out.eval(&sizes(&[("h", 224)])), Ok(112));
    // pooling 3 stride 2 over 112: 56 positions with ceil_mode, 55 without
    let pool = window(&dim("h[1..512]"), &w(3, 2, 0, true)).unwrap_err();
    assert_eq!(
        pool.to_string(),
        "the padded input of a window spanning 3 must be at least 3, and h[1..512] ranges over [1..512]"
    );
    let pool = window(&dim("h[3..512]"), &w(3, 2, 0, true)).unwrap();
    assert_eq!(pool.eval(&sizes(&[("h", 112)])), Ok(56));
    // ceil_mode's last window would start in the end padding: dropped
    let edge = Window {
        pad_begin: 0,
        pad_end: 1,
        ..w(1, 2, 0, true)
    };
    assert_eq!(window(&Dim::constant(4), &edge), Ok(Dim::constant(2)));
    assert_eq!(window(&Dim::constant(5), &edge), Ok(Dim::constant(3)));
    let floor = window(&dim("h[3..512]"), &w(3, 2, 0, false)).unwrap();
    assert_eq!(floor.eval(&sizes(&[("h", 112)])), Ok(55));
}

#[test]
fn reshapes_infer_a_minus_one_where_it_divides_and_refuse_where_it_may_not() {
    use infer::reshape;
    let heads = reshape(&dims(&["b[1..8]", "s[1..512]", "768"]), &[0, 0, 12, 64], false).unwrap();
    assert_eq!(shown(&heads), ["b[1..8]", "s[1..512]", "12", "64"]);
    let flat = reshape(&dims(&["b[1..8]", "s[1..512]", "12", "64"]), &[-1, 768], false).unwrap();
    assert_eq!(shown(&flat), ["b[1..8] * s[1..512]", "768"]);
    // the -1 divided by symbolic sizes
    let back = reshape(&dims(&["b[1..8]", "s[1..512]", "768"]), &[0, 0, -1, 64], false).unwrap();
    assert_eq!(shown(&back), ["b[1..8]", "s[1..512]", "12", "64"]);
    assert_eq!(
        reshape(&dims(&["s[1..512]", "3"]), &[-1, 8], false)
            .unwrap_err()
            .to_string(),
        "reshape [s[1..512], 3] to [-1, 8]: a dimension must be divisible by 8 here, and s[1..512] * 3 is not"
    );
    assert_eq!(
        reshape(&dims(&["s[1..512]", "4"]), &[4, 512], false)
            .unwrap_err()
            .to_string(),
        "reshape [s[1..512], 4] to [4, 512]: s[1..512] * 4 elements cannot become 2048"
    );
}

#[test]
fn concatenations_add_and_slices_clamp() {
    use infer::{concat, slice};
    let kv = concat(&[dims(&["p[0..64]", "64"]), dims(&["s[1..512]", "64"])], 0).unwrap();
    assert_eq!(shown(&kv), ["p[0..64] + s[1..512]", "64"]);
    assert!(concat(&[dims(&["s[1..8]", "64"]), dims(&["s[1..8]", "32"])], 0).is_err());
    // the first token, the last 16, everything from 1 on, every other one
    let n = dim("s[1..512]");
    assert_eq!(slice(&n, 0, 1, 1).unwrap().eval(&sizes(&[("s", 7)])), Ok(1));
    let last = slice(&n, -16, i64::MAX, 1).unwrap();
    assert_eq!(last.eval(&sizes(&[("s", 7)])), Ok(7));
    assert_eq!(last.eval(&sizes(&[("s", 100)])), Ok(16));
    assert_eq!(slice(&n, 1, i64::MAX, 1).unwrap().to_string(), "s[1..512] - 1");
    let odd = slice(&n, 0, i64::MAX, 2).unwrap();
    assert_eq!(odd.eval(&sizes(&[("s", 7)])), Ok(4));
    assert!(slice(&n, 0, 4, -1).is_err());
}

fn inputs(list: &[(&str, &[&str])]) -> Result<InputDims, DimError> {
    InputDims::new(list.iter().map(|(n, ds)| (n.to_string(), dims(ds))).collect())
}

#[test]
fn inputs_share_their_symbols_and_bind_them_from_shapes() {
    // the bare `s` of the mask takes the range and optimals given with the ids
    let d = inputs(&[("ids", &["1", "s[1..512]{128}"]), ("mask", &["1", "s"])]).unwrap();
    assert_eq!(d.symbols().len(), 1);
    assert_eq!(show(&d.inputs()[1].1), "[1, s[1..512]{128}]");
    let given = |shapes: Vec<(&'static str, Vec<usize>)>| {
        move |name: &str| shapes.iter().find(|(n, _)| *n == name).map(|(_, s)| s.clone())
    };
    assert_eq!(d.bind(&given(vec![("ids", vec![1, 7])])).unwrap(), sizes(&[("s", 7)]));
    assert_eq!(d.bind(&given(vec![])).unwrap(), sizes(&[]));
    let err = |shapes| d.bind(&given(shapes)).unwrap_err().to_string();
    assert_eq!(
        err(vec![("ids", vec![1, 7]), ("mask", vec![1, 9])]),
        "input `mask` dimension 1 makes s 9, and input `ids` dimension 1 made it 7"
    );
    assert_eq!(
        err(vec![("ids", vec![1, 600])]),
        "input `ids` dimension 1: s is 600, outside its range [1..512]"
    );
    assert_eq!(
        err(vec![("ids", vec![2, 7])]),
        "input `ids` dimension 0 is 2, the program takes 1"
    );
    assert_eq!(
        err(vec![("ids", vec![7])]),
        "input `ids` has shape [7], and the program takes 2 dimensions ([1, s[1..512]{128}])"
    );
    assert_eq!(
        d.shapes_at(&sizes(&[("s", 3)])).unwrap(),
        [("ids".to_string(), vec![1, 3]), ("mask".to_string(), vec![1, 3])]
    );
    // an expression of a bound symbol is checked against its value
    let e = inputs(&[("a", &["n[1..8]"]), ("b", &["n * 2 + 1"])]).unwrap();
    let err = e
        .bind(&given(vec![("a", vec![3]), ("b", vec![6])]))
        .unwrap_err()
        .to_string();
    assert_eq!(err, "input `b` dimension 0 is 6, and n[1..8] * 2 + 1 is 7 there");
    // a symbol only inside a sum cannot be read off a shape
    let err = inputs(&[("a", &["n[1..8] + 2"])]).unwrap_err().to_string();
    assert_eq!(
        err,
        "symbol n: it must be a whole dimension of some input, or a multiple of one, so that a value's shape gives its size"
    );
    // a multiple of a symbol gives it by a division, and refuses a size it does not divide
    let m = inputs(&[("image", &["1", "3", "h[1..8] * 32", "w[1..8] * 32"])]).unwrap();
    assert_eq!(
        m.bind(&given(vec![("image", vec![1, 3, 64, 256])])).unwrap(),
        sizes(&[("h", 2), ("w", 8)])
    );
    let err = |shapes| m.bind(&given(shapes)).unwrap_err().to_string();
    assert_eq!(
        err(vec![("image", vec![1, 3, 100, 64])]),
        "input `image` dimension 2 is 100, not a multiple of 32 (the program takes h[1..8] * 32)"
    );
    assert_eq!(
        err(vec![("image", vec![1, 3, 64, 288])]),
        "input `image` dimension 3: w is 9, outside its range [1..8]"
    );
}

#[test]
fn the_points_to_compile_are_every_combination_of_optimal_sizes() {
    let d = inputs(&[("x", &["b[1..16]{1, 8}", "s[1..512]{64, 128}"])]).unwrap();
    let points = d.optimal_points().unwrap();
    let shown: Vec<String> = points.iter().map(show_sizes).collect();
    assert_eq!(shown, ["b=1, s=64", "b=1, s=128", "b=8, s=64", "b=8, s=128"]);
    let err = inputs(&[("x", &["b[1..16]{1, 8}", "s[1..512]"])])
        .unwrap()
        .optimal_points()
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("symbol s: s[1..512] has no optimal size to compile for"),
        "{err}"
    );
    let many = inputs(&[("x", &["a{1, 2, 3, 4, 5}", "b{1, 2, 3, 4}"])])
        .unwrap()
        .optimal_points()
        .unwrap_err();
    assert_eq!(
        many.to_string(),
        "the optimal sizes of a{1, 2, 3, 4, 5}, b{1, 2, 3, 4} make 20 programs, more than 16: give fewer"
    );
    assert!(inputs(&[("x", &["3", "4"])]).unwrap().is_fixed());
    let least = inputs(&[("x", &["b[2..16]", "s{64}"])]).unwrap().with_least_optimals();
    assert_eq!(show(&least.inputs()[0].1), "[b[2..16]{2}, s{64}]");
    assert_eq!(least.optimal_points().unwrap(), [sizes(&[("b", 2), ("s", 64)])]);
}
