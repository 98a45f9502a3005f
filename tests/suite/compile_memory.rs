//! A compile's memory (issue 38). The weights stay in the memory-mapped model file, sliced
//! rather than copied, and the folded forms the rewrite offers for each (channels last, packed
//! panels, Winograd's filters) are computed only for the form extraction picks, one weight at
//! a time as the file is written. So a compile's peak stays within 1.5 times the model's size
//! plus 300 MB (the compiler's own code and LLVM's); computing every form up front, as the
//! compiler once did, took about 7 times the model.

use crate::common::{float_value, ints, model_bytes, mxc, node, stderr};
use mxc_onnx::proto;

/// An f32 initializer of `dims` in `raw_data`, its values a fixed pseudo-random sequence.
fn raw_weight(name: &str, dims: &[i64], seed: u32) -> proto::TensorProto {
    let count: i64 = dims.iter().product();
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    let bytes: Vec<u8> = (0..count)
        .flat_map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((state >> 8) as f32 / (1u32 << 24) as f32 * 0.02 - 0.01).to_le_bytes()
        })
        .collect();
    proto::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(proto::tensor_proto::DataType::Float as i32),
        raw_data: Some(bytes.into()),
        ..Default::default()
    }
}

#[test]
fn a_large_convolutional_model_compiles_within_one_and_a_half_times_its_size_plus_300_mb() {
    // twelve 3x3 convolutions of 512 channels on 14 x 14: 12 x 9.4 MB of weights
    let (layers, channels) = (12, 512);
    let mut nodes = Vec::new();
    let mut initializer = Vec::new();
    for i in 0..layers {
        let input = if i == 0 { "x".to_string() } else { format!("r{}", i - 1) };
        let output = if i == layers - 1 {
            "y".to_string()
        } else {
            format!("r{i}")
        };
        let (w, b, c) = (format!("w{i}"), format!("b{i}"), format!("c{i}"));
        initializer.push(raw_weight(&w, &[channels, channels, 3, 3], i as u32));
        initializer.push(raw_weight(&b, &[channels], 100 + i as u32));
        let attrs = vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])];
        nodes.push(node("Conv", &[&input, &w, &b], &c, attrs));
        nodes.push(node("Relu", &[&c], &output, vec![]));
    }
    let graph = proto::GraphProto {
        name: Some("deep".into()),
        node: nodes,
        initializer,
        input: vec![float_value("x", &["1", "512", "14", "14"])],
        output: vec![float_value("y", &["1", "512", "14", "14"])],
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("deep.onnx");
    std::fs::write(&model, model_bytes(graph)).unwrap();
    let size_mb = std::fs::metadata(&model).unwrap().len() as f64 / 1e6;
    assert!(size_mb > 100.0, "the model is {size_mb:.1} MB");
    let file = dir.path().join("deep.mxr");
    let out = mxc(&[
        "compile",
        model.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
        "--timings",
        "--no-cache",
    ]);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    let total = said
        .lines()
        .find(|l| l.starts_with("total"))
        .expect("the timings' total");
    let peak_mb: f64 = total.split_whitespace().nth(3).unwrap().parse().unwrap();
    let limit = 1.5 * size_mb + 300.0;
    assert!(
        peak_mb <= limit,
        "a compile of a {size_mb:.0} MB model peaked at {peak_mb:.0} MB, above {limit:.0} MB:\n{said}"
    );
    // every weight went into the file (the model's, in whatever forms were picked)
    let written = std::fs::metadata(&file).unwrap().len() as f64 / 1e6;
    assert!(
        written > 0.9 * size_mb,
        "a {written:.1} MB file for a {size_mb:.1} MB model"
    );
}
