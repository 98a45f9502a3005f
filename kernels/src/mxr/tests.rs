//! Tests of the `.mxr` format: round trips, damage, plans that disagree, signatures, GPU code.
use super::*;
use crate::library;
use mxc_dialects::interface::{Structure, Value};

fn sample() -> Mxr {
    let ty = TensorType::new(DType::F32, vec![2]);
    let program = Program {
        buffers: vec![
            Buffer {
                ty: ty.clone(),
                kind: BufferKind::Input(0),
            },
            Buffer {
                ty: ty.clone(),
                kind: BufferKind::Constant(Tensor::from_f32s(vec![2], &[1.0, 2.0])),
            },
            Buffer {
                ty,
                kind: BufferKind::Temp,
            },
        ],
        kernels: vec![KernelSignature {
            symbol: "k0_add_entry".into(),
            arg_bytes: vec![8, 8, 8],
            results: 1,
            range: 2,
            sizes: None,
        }],
        steps: vec![Step {
            symbol: "k0_add_entry".into(),
            args: vec![0, 1, 2],
            range: 2,
            splittable: true,
            per_block: false,
            work: 8,
            flops: 4,
            call: None,
        }],
        main: mxc_dialects::program::straight(1),
        inputs: vec![Binding {
            name: "x".into(),
            buffer: 0,
        }],
        outputs: vec![Binding {
            name: "y".into(),
            buffer: 2,
        }],
        interface: Default::default(),
        symbols: Vec::new(),
    };
    Mxr {
        producer: "mxc 0.1.0".into(),
        target: "cpu".into(),
        precision: "fp16 (conv)".into(),
        cpu: "test".into(),
        features: vec!["sse3".into()],
        memory: program.memory_plan(),
        program,
        library: library::header(),
        code_objects: Vec::new(),
        signer: None,
    }
}

fn any(bytes: &[u8]) -> Result<Mxr, RunError> {
    decode(bytes, "a.mxr", None, &TrustPolicy::AnyIntact)
}

/// The bytes of `m`, digested again after `damage` changed its metadata (what someone who
/// rewrites a file does: the digest alone proves only that nothing changed by accident).
fn redigested(m: &Mxr, damage: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut bytes = encode(m, None);
    damage(&mut bytes);
    let body = bytes.len() - TRAILER;
    let digest = super::digesting::digest(&bytes[..body]);
    bytes[body..body + DIGEST].copy_from_slice(&digest);
    bytes
}

/// Weights folded at compile time reach the writer deferred: it computes each as it writes it
/// (on its own threads), the bytes are those of the computed value, and the tensor does not
/// keep them.
#[test]
fn deferred_weights_are_computed_as_they_are_written_and_not_kept() {
    let computed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut m = sample();
    let mut weights = Vec::new();
    for i in 0..5u8 {
        let count = computed.clone();
        let ty = TensorType::new(DType::F32, vec![2]);
        let value = move || {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Tensor::from_f32s(vec![2], &[i as f32, 0.5])
        };
        let t = Tensor::deferred(ty.clone(), Box::new(value));
        weights.push(t.clone());
        m.program.buffers.push(Buffer {
            ty,
            kind: BufferKind::Constant(t),
        });
    }
    let bytes = encode(&m, None);
    assert_eq!(
        computed.load(std::sync::atomic::Ordering::SeqCst),
        5,
        "each computed once"
    );
    assert!(weights.iter().all(Tensor::is_deferred), "none kept");
    let mut known = sample();
    for i in 0..5u8 {
        let t = Tensor::from_f32s(vec![2], &[i as f32, 0.5]);
        known.program.buffers.push(Buffer {
            ty: t.ty.clone(),
            kind: BufferKind::Constant(t),
        });
    }
    assert_eq!(bytes, encode(&known, None));
    assert!(decode(&bytes, "a.mxr", Some("cpu"), &TrustPolicy::AnyIntact).is_ok());
}

#[test]
fn round_trips_with_weights_aligned() {
    let bytes = encode(&sample(), None);
    assert_eq!(bytes.len() % 8, 0);
    let back = decode(&bytes, "a.mxr", Some("cpu"), &TrustPolicy::AnyIntact).unwrap();
    assert_eq!(back, sample());
    // the weight [1.0, 2.0] starts at a 64-byte boundary of the file
    let weight: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let at = bytes.windows(8).position(|w| w == weight.as_slice()).unwrap();
    assert_eq!(at % ALIGN, 0);
    assert_eq!(encode(&back, None), bytes, "deterministic");
}

#[test]
fn a_read_file_keeps_its_weights_in_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.mxr");
    std::fs::write(&path, encode(&sample(), None)).unwrap();
    let back = read(&path, None, &TrustPolicy::AnyIntact).unwrap();
    assert_eq!(back, sample());
    let BufferKind::Constant(weight) = &back.program.buffers[1].kind else {
        panic!("buffer 1 is the weight");
    };
    // the mapping starts at a page boundary, so the weight keeps its 64-byte file alignment
    assert_eq!(weight.bytes().as_ptr() as usize % ALIGN, 0);
}

#[test]
fn damage_of_every_kind_is_a_clear_error() {
    let bytes = encode(&sample(), None);
    let err = |b: &[u8], target: Option<&str>| {
        decode(b, "a.mxr", target, &TrustPolicy::AnyIntact)
            .unwrap_err()
            .to_string()
    };
    assert!(err(&bytes[..bytes.len() - 1], None).contains("truncated"));
    assert!(err(&bytes[..10], None).contains("truncated"));
    let mut flipped = bytes.clone();
    flipped[HEAD + 3] ^= 1;
    assert!(err(&flipped, None).contains("digest mismatch"));
    let mut foreign = bytes.clone();
    foreign[4] = 99;
    assert!(err(&foreign, None).contains(&format!("format version 99; this mxc reads version {VERSION}")));
    assert!(err(b"MXCA....", None).contains("bad magic"));
    assert!(err(&bytes, Some("ref")).contains("compiled for target cpu, not ref"));
    for cut in (0..bytes.len()).step_by(7) {
        assert!(any(&bytes[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn a_plan_that_disagrees_with_its_kernels_is_refused() {
    let err = |change: &dyn Fn(&mut Mxr)| {
        let mut m = sample();
        change(&mut m);
        any(&redigested(&m, |_| {})).unwrap_err().to_string()
    };
    // a step with fewer arguments than its kernel reads
    let msg = err(&|m| {
        m.program.steps[0].args.pop();
    });
    assert!(msg.contains("2 arguments, the kernel takes 3"), "{msg}");
    // a result bound to a weight (the read-only mapping)
    let msg = err(&|m| m.program.steps[0].args[2] = 1);
    assert!(msg.contains("result 0 is buffer 1, which is not a temporary"), "{msg}");
    // a result bound to a smaller buffer
    let msg = err(&|m| m.program.buffers[2].ty = TensorType::new(DType::F32, vec![1]));
    assert!(
        msg.contains("argument 2 is buffer 2 of 4 bytes, the kernel takes 8"),
        "{msg}"
    );
    // a range past the kernel's loop
    for range in [1u64 << 62, i64::MAX as u64] {
        let msg = err(&|m| m.program.steps[0].range = range);
        assert!(
            msg.contains(&format!("range {range}, the kernel's loop has 2")),
            "{msg}"
        );
    }
    // an arena smaller than the kernels write
    let msg = err(&|m| m.memory.size = 4);
    assert!(
        msg.contains("does not lie aligned inside the arena of 4 bytes"),
        "{msg}"
    );
    // an input with no binding
    let msg = err(&|m| m.program.inputs.clear());
    assert!(msg.contains("buffer 0 is input 0, which is not bound to it"), "{msg}");
    // a buffer whose bytes overflow
    let msg = err(&|m| m.program.buffers[2].ty = TensorType::new(DType::F32, vec![1 << 62, 4]));
    assert!(msg.contains("more bytes than the address space"), "{msg}");
    let msg = err(&|m| m.program.steps[0].symbol = "k9_entry".into());
    assert!(msg.contains("calls `k9_entry`, which no kernel is"), "{msg}");
    let msg = err(&|m| m.library = b"#!/bin/sh\n".to_vec());
    assert!(msg.contains("the kernels: not an ELF file"), "{msg}");
    // an interface naming ports the program does not have
    let msg = err(&|m| {
        m.program.interface.outputs.push(Value {
            name: "y".into(),
            structure: Structure::Sequence(2),
        })
    });
    assert!(
        msg.contains("the interface's outputs are carried by [y[0], y[1]], the program's outputs are [y]"),
        "{msg}"
    );
}

#[test]
fn host_steps_and_string_weights_round_trip() {
    use mxc_dialects::program::{HostStep, Item};
    use mxc_dialects::{Attr, Attrs, OpKind};
    let mut m = sample();
    let strings = |kind| Buffer {
        ty: TensorType::new(DType::Str, vec![2]),
        kind,
    };
    let words = Tensor::from_strings(vec![2], vec!["é".into(), "a \"b\"".into()]);
    m.program.buffers.push(strings(BufferKind::Constant(words)));
    m.program.buffers.push(strings(BufferKind::Temp));
    m.program.main.push(Item::Host(Box::new(HostStep {
        kind: OpKind::StringCase,
        attrs: Attrs::new().with("to", Attr::Str("upper".into())),
        operands: vec![3],
        results: vec![4],
    })));
    m.program.outputs.push(Binding {
        name: "s".into(),
        buffer: 4,
    });
    m.memory = m.program.memory_plan();
    let bytes = encode(&m, None);
    let back = any(&bytes).unwrap();
    assert_eq!(back, m);
    // the strings are in the metadata, not a weight of handles in the data
    assert!(bytes.windows(3).any(|w| w == "a \"".as_bytes()));
    let msg = any(&redigested(&m, |b| {
        let at = b.windows(2).position(|w| w == "é".as_bytes()).unwrap();
        // the count of strings (u64) before the first one's length (u64)
        b[at - 16] = 3;
    }))
    .unwrap_err()
    .to_string();
    assert!(msg.contains("3 strings for a weight of tensor<2xstring>"), "{msg}");
    let msg = any(&redigested(&m, |b| {
        let at = b.windows(11).position(|w| w == b"string_case").unwrap();
        b[at..at + 11].copy_from_slice(b"string_cose");
    }))
    .unwrap_err()
    .to_string();
    assert!(msg.contains("a host step runs unknown op `string_cose`"), "{msg}");
}

#[test]
fn gpu_code_goes_only_with_the_gpu_target() {
    use mxc_dialects::program::{CodeFormat, GpuArch};
    let ptx = CodeObject {
        arch: GpuArch::Nvidia("sm_90".into()),
        format: CodeFormat::Ptx,
        bytes: b".version 8.0\n.target sm_90\n".to_vec(),
    };
    let cpu_with_ptx = sample().with_code_objects(vec![ptx.clone()]);
    let msg = any(&encode(&cpu_with_ptx, None)).unwrap_err().to_string();
    assert!(msg.contains("a program for cpu with code for GPUs"), "{msg}");
    let gpu_with_host_kernels = Mxr {
        target: GPU_TARGET.into(),
        ..sample()
    };
    let msg = any(&encode(&gpu_with_host_kernels, None)).unwrap_err().to_string();
    assert!(
        msg.contains("a gpu program must hold code for GPUs and no host kernels"),
        "{msg}"
    );
    // the PTX is read back and checked against the plan: its kernel is missing
    let gpu = Mxr {
        target: GPU_TARGET.into(),
        library: Vec::new(),
        ..sample()
    }
    .with_code_objects(vec![ptx]);
    let msg = any(&encode(&gpu, None)).unwrap_err().to_string();
    assert!(
        msg.contains("the code for sm_90: kernel `k0_add_entry` is missing"),
        "{msg}"
    );
}

#[test]
fn the_interface_round_trips() {
    let mut m = sample();
    m.program.interface.outputs.push(Value {
        name: "y".into(),
        structure: Structure::Optional {
            of_sequence: false,
            value: Some(Box::new(Structure::Tensor)),
        },
    });
    m.program.interface.inputs.push(Value {
        name: "x".into(),
        structure: Structure::Tensor,
    });
    let back = any(&encode(&m, None)).unwrap();
    assert_eq!(back.program.interface, m.program.interface);
    // a sequence longer than the program has ports is refused before it is expanded
    m.program.interface.outputs[0].structure = Structure::Sequence(1 << 40);
    let msg = any(&redigested(&m, |_| {})).unwrap_err().to_string();
    assert!(
        msg.contains("a sequence of 1099511627776 tensors in a program of 2 inputs and outputs"),
        "{msg}"
    );
}

#[test]
fn signatures_and_the_trust_policy() {
    let (key, stranger) = (SecretKey::generate().unwrap(), SecretKey::generate().unwrap());
    let trusted = TrustPolicy::SignedBy(vec![key.public()]);
    let signed = encode(&sample(), Some(&key));
    let back = decode(&signed, "a.mxr", None, &trusted).unwrap();
    assert_eq!(back.signer, Some(key.public()));
    assert_eq!(
        any(&signed).unwrap().signer,
        Some(key.public()),
        "checked without a policy too"
    );
    let err = |b: &[u8], trust: &TrustPolicy| decode(b, "a.mxr", None, trust).unwrap_err().to_string();
    let unsigned = encode(&sample(), None);
    assert!(err(&unsigned, &trusted).contains("not signed, and the trust policy asks"));
    let by_stranger = encode(&sample(), Some(&stranger));
    assert!(err(&by_stranger, &trusted).contains("which the trust policy does not trust"));
    // the shared object swapped and the digest made again: the signature no longer matches,
    // under any policy
    let mut swapped = sample();
    swapped.library.extend(b"another object");
    let swapped_bytes = redigested(&swapped, |_| {});
    let mut resigned = swapped_bytes.clone();
    let tail = signed.len() - TRAILER + DIGEST;
    resigned[swapped_bytes.len() - TRAILER + DIGEST..].copy_from_slice(&signed[tail..]);
    assert!(err(&resigned, &trusted).contains("does not match the file: it was changed after signing"));
    assert!(err(&resigned, &TrustPolicy::AnyIntact).contains("does not match the file"));
    assert!(err(&swapped_bytes, &trusted).contains("not signed"));
}

#[test]
fn features_the_cpu_lacks_are_named() {
    let features = vec!["avx2".to_string(), "avx512f".to_string(), "fma".to_string()];
    assert_eq!(missing(&features, |f| f != "avx512f"), ["avx512f"]);
    assert!(missing(&features, |_| true).is_empty());
}

#[test]
fn required_features_are_the_enabled_known_ones() {
    let f = required_features("+sse2,+avx2,-avx512f,+fma,+cx16,+avx2");
    assert_eq!(f, ["avx2", "fma"]);
}

#[test]
fn a_library_call_round_trips_and_an_unknown_callee_is_refused_naming_it() {
    use mxc_dialects::mx::call::{Activation, MatmulCall};
    // two 1x1 products: y[i] = x[i] * w[i]
    let mut m = sample();
    m.program.steps[0].call = Some(LibraryCall::Matmul(MatmulCall {
        batch: 2,
        m: 1,
        n: 1,
        k: 1,
        trans_a: false,
        trans_b: false,
        stride_a: 1,
        stride_b: 1,
        alpha: 1.0,
        a: 0,
        b: 1,
        bias: None,
        activation: Activation::Relu,
    }));
    let bytes = encode(&m, None);
    assert_eq!(any(&bytes).unwrap(), m);
    let renamed = redigested(&m, |b| {
        let at = b.windows(13).position(|w| w == b"blaslt.matmul").unwrap();
        b[at..at + 13].copy_from_slice(b"blaslt.gemmxx");
    });
    let err = any(&renamed).unwrap_err().to_string();
    assert!(
        err.contains("step `k0_add_entry` calls `blaslt.gemmxx`, which this runtime does not know"),
        "{err}"
    );
}

/// `sample` as the program for x of `n` elements, `n` the size of symbol n.
fn sized_sample() -> SizedMxr {
    use mxc_dialects::dim::{parse, InputDims, Sizes};
    let at = |n: usize| {
        let mut m = sample();
        for b in &mut m.program.buffers {
            if !matches!(b.kind, BufferKind::Constant(_)) {
                b.ty = TensorType::new(DType::F32, vec![n]);
            }
        }
        m.program.kernels[0].arg_bytes = vec![4 * n as u64, 8, 4 * n as u64];
        m.memory = m.program.memory_plan();
        Variant {
            sizes: Sizes::from([("n".to_string(), n as u64)]),
            mxr: m,
        }
    };
    SizedMxr {
        dims: InputDims::new(vec![("x".into(), vec![parse("n[1..4]{1, 2}").unwrap()])]).unwrap(),
        variants: vec![at(1), at(2)],
        items: vec![Items {
            symbol: "n".into(),
            inputs: vec![("x".into(), 0)],
            outputs: vec![("y".into(), 0)],
        }],
        generic: None,
    }
}

#[test]
fn programs_by_size_round_trip_and_refuse_damage() {
    let sized = sized_sample();
    let mut bytes = Vec::new();
    write_contents(&Contents::BySize(sized.clone()), None, &mut bytes).unwrap();
    assert_eq!(&bytes[..4], b"MXRS");
    let read = decode_any(&bytes, "s.mxr", None, &TrustPolicy::AnyIntact).unwrap();
    assert_eq!(read, Contents::BySize(sized.clone()));
    // each program lies at a 64-byte aligned offset, so its weights stay aligned in a mapping
    let starts: Vec<usize> = (0..bytes.len() - 4).filter(|&i| &bytes[i..i + 4] == MAGIC).collect();
    assert_eq!(starts.len(), 2);
    assert!(starts.iter().all(|s| s % ALIGN == 0), "{starts:?}");
    // the weight both programs hold alike is stored once
    let weight: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let copies = bytes.windows(weight.len()).filter(|w| *w == weight.as_slice()).count();
    assert_eq!(copies, 1);
    // so a program taken out of the file alone is refused
    let alone = &bytes[starts[0]..starts[1]];
    let len = u64::from_le_bytes(alone[8..16].try_into().unwrap()) as usize;
    let err = decode(&alone[..len], "p.mxr", None, &TrustPolicy::AnyIntact)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "loading the kernels: p.mxr: a weight shared between programs, in a file of one program"
    );
    // a one-program reader names what the file holds
    let err = decode(&bytes, "s.mxr", None, &TrustPolicy::AnyIntact)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "loading the kernels: s.mxr: holds programs for symbolic sizes (x [n[1..4]{1, 2}]); this needs a file of one program"
    );
    let bad = |bytes: &[u8]| {
        decode_any(bytes, "s.mxr", None, &TrustPolicy::AnyIntact)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        bad(&bytes[..bytes.len() - 1]),
        format!(
            "loading the kernels: s.mxr: truncated or extended: {} bytes, the file says {}",
            bytes.len() - 1,
            bytes.len()
        )
    );
    let mut flipped = bytes.clone();
    flipped[HEAD + 3] ^= 1;
    assert_eq!(
        bad(&flipped),
        "loading the kernels: s.mxr: digest mismatch: the file is corrupt"
    );
    let mut version = bytes.clone();
    version[4] = 9;
    assert_eq!(
        bad(&version),
        "loading the kernels: s.mxr: programs-by-size format version 9; this mxc reads version 3 (compile the model again)"
    );
    // items whose axis the programs do not have are refused
    let mut wrong = sized;
    wrong.items[0].outputs[0].1 = 1;
    let mut bytes = Vec::new();
    write_contents(&Contents::BySize(wrong), None, &mut bytes).unwrap();
    assert_eq!(
        bad(&bytes),
        "loading the kernels: s.mxr: the program for n=1 has no `y` with 1 items on axis 1"
    );
}

#[test]
fn a_size_picks_its_program_or_runs_in_parts() {
    let shape = |n: usize| move |name: &str| (name == "x").then(|| vec![n]);
    let Selected::One(sizes, m) = sized_sample().select(&shape(2)).unwrap() else {
        panic!("one program")
    };
    assert_eq!((sizes["n"], m.program.buffers[0].ty.shape.clone()), (2, vec![2]));
    let Selected::Parts(parts) = sized_sample().select(&shape(3)).unwrap() else {
        panic!("parts")
    };
    assert_eq!(parts.runs, [(0, 0, 2), (1, 2, 1)]);
    assert_eq!(parts.programs.iter().map(|(s, _)| s["n"]).collect::<Vec<_>>(), [2, 1]);
    // sums of the sizes, the fewest runs: 4 from programs for 3 and 2 as 2 + 2; 7 as 3 + 2 + 2
    assert_eq!(sized::split(4, &[3, 2]), Some(vec![(1, 0, 2), (1, 2, 2)]));
    assert_eq!(sized::split(7, &[3, 2]), Some(vec![(0, 0, 3), (1, 3, 2), (1, 5, 2)]));
    assert_eq!(sized::split(6, &[8, 1]), Some((0..6).map(|k| (1, k, 1)).collect()));
    // no sum makes it: the fewest items filled in; 1 from programs for 3 and 2 fills one
    assert_eq!(sized::split(1, &[3, 2]), Some(vec![(1, 0, 1)]));
    assert_eq!(sized::split(5, &[4]), Some(vec![(0, 0, 4), (0, 4, 1)]));
    assert_eq!(sized::split(0, &[1]), None);
    let err = sized_sample().select(&shape(5)).unwrap_err().to_string();
    assert_eq!(err, "input `x` dimension 0: n is 5, outside its range [1..4]");
    // an odd batch from a program for two alone: its last run filled up
    let mut twos = sized_sample();
    twos.variants.remove(0);
    let Selected::Parts(parts) = twos.select(&shape(3)).unwrap() else {
        panic!("parts")
    };
    assert_eq!(parts.runs, [(0, 0, 2), (0, 2, 1)]);
    // without items, a size between the optimal ones is refused
    let mut no_items = sized_sample();
    no_items.items.clear();
    let err = no_items.select(&shape(3)).unwrap_err().to_string();
    assert!(
        err.starts_with(
            "no program in this file runs n=3: it holds programs for (n=1), (n=2) and no program for every size"
        ),
        "{err}"
    );
}
