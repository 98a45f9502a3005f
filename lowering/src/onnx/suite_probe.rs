//! TEMPORARY probe over the ONNX node suite (to be deleted).
#[cfg(test)]
mod tests {
    use super::super::proto::ModelProto;
    use super::super::*;
    use prost::Message;
    use std::collections::BTreeMap;
    use std::path::Path;

    #[test]
    #[ignore]
    fn probe_node_suite() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/onnx-backend-tests/node");
        let mut cases: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
        cases.sort();
        let (mut ok, mut fail, mut evaluated, mut mismatched) = (0, 0, 0, 0);
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut lines = String::new();
        for case in &cases {
            let name = case.file_name().unwrap().to_string_lossy().to_string();
            let model_path = case.join("model.onnx");
            let bytes = std::fs::read(&model_path).unwrap();
            let model = ModelProto::decode(bytes.as_slice()).unwrap();
            let g = model.graph.as_ref().unwrap();
            let inits: Vec<&str> = g.initializer.iter().map(|t| t.name()).collect();
            let inputs: Vec<&str> = g
                .input
                .iter()
                .map(|i| i.name())
                .filter(|n| !inits.contains(n))
                .collect();
            let mut opts = ImportOptions::default();
            for (i, n) in inputs.iter().enumerate() {
                let p = case.join(format!("test_data_set_0/input_{i}.pb"));
                if let Ok((_, t)) = read_tensor_file(&p) {
                    opts.specialize.insert(n.to_string(), t);
                }
            }
            let r = import_file(&model_path, &opts).and_then(|g| {
                mxc_dialects::verify(&g).map_err(|e| ImportError::Model(format!("verify: {e}")))?;
                Ok(g)
            });
            match r {
                Ok(graph) => {
                    ok += 1;
                    // numerical check where every op is evaluable
                    let mut vals: Vec<Option<mxc_dialects::Tensor>> = vec![None; graph.num_values()];
                    let mut all = true;
                    for p in &graph.inputs {
                        vals[p.value.index()] = opts.specialize.get(&p.name).cloned();
                    }
                    for op in &graph.ops {
                        if op.kind == mxc_dialects::OpKind::Constant {
                            vals[op.results[0].index()] = op.attrs.tensor("value").ok().cloned();
                            continue;
                        }
                        let ins: Option<Vec<mxc_dialects::Tensor>> =
                            op.operands.iter().map(|v| vals[v.index()].clone()).collect();
                        let Some(ins) = ins else {
                            all = false;
                            break;
                        };
                        let refs: Vec<&mxc_dialects::Tensor> = ins.iter().collect();
                        match mxc_dialects::eval::eval(op.kind, &refs, &op.attrs) {
                            Some(Ok(outs)) => {
                                for (r, t) in op.results.iter().zip(outs) {
                                    vals[r.index()] = Some(t);
                                }
                            }
                            Some(Err(e)) => {
                                lines.push_str(&format!("EVALERR {name}: {e}\n"));
                                all = false;
                                break;
                            }
                            None => {
                                all = false;
                                break;
                            }
                        }
                    }
                    if all {
                        evaluated += 1;
                        for (i, p) in graph.outputs.iter().enumerate() {
                            let Ok((_, want)) = read_tensor_file(&case.join(format!("test_data_set_0/output_{i}.pb")))
                            else {
                                continue;
                            };
                            let got = vals[p.value.index()].clone().unwrap();
                            let same = got.ty == want.ty
                                && (0..got.len()).all(|k| {
                                    let (a, b) = (got.get_f64(k), want.get_f64(k));
                                    a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 * b.abs().max(1e-3)
                                });
                            if !same {
                                mismatched += 1;
                                lines.push_str(&format!(
                                    "MISMATCH {name} output {i}: got {:?} {:?} want {:?} {:?}\n",
                                    got.ty,
                                    &got.to_f64_vec()[..got.len().min(8)],
                                    want.ty,
                                    &want.to_f64_vec()[..want.len().min(8)]
                                ));
                            }
                        }
                    }
                }
                Err(e) => {
                    fail += 1;
                    let msg = e.to_string();
                    lines.push_str(&format!("{name}: {msg}\n"));
                    let key = match &e {
                        ImportError::UnsupportedOp { op, .. } => format!("no parser: {op}"),
                        ImportError::Node { op, .. } => format!("node error: {op}"),
                        other => format!("{}", other.to_string().split(':').next().unwrap_or("")),
                    };
                    groups.entry(key).or_default().push(name);
                }
            }
        }
        let mut summary = format!("ok {ok} fail {fail} evaluated {evaluated} mismatched {mismatched}\n");
        let mut gs: Vec<_> = groups.into_iter().collect();
        gs.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        for (k, v) in gs {
            summary.push_str(&format!("{:5} {k}\n", v.len()));
        }
        std::fs::write("/tmp/probe_summary.txt", &summary).unwrap();
        std::fs::write("/tmp/probe_errors.txt", &lines).unwrap();
    }
}
#[cfg(test)]
mod models {
    use super::super::*;
    use std::path::Path;
    #[test]
    #[ignore]
    fn probe_models() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut out = String::new();
        for p in [
            ".cache/models/encoder/model.onnx",
            ".cache/models/convnet/model.onnx",
            "examples/tiny_cnn.onnx",
        ] {
            match import_file(&root.join(p), &ImportOptions::default()) {
                Ok(g) => {
                    mxc_dialects::verify(&g).unwrap();
                    let mut counts = std::collections::BTreeMap::new();
                    for op in &g.ops {
                        *counts.entry(op.kind.name()).or_insert(0) += 1;
                    }
                    out.push_str(&format!("{p}: {counts:?}\n"));
                    out.push_str(&mxc_dialects::text::print(&g));
                }
                Err(e) => out.push_str(&format!("{p}: ERROR {e}\n")),
            }
        }
        std::fs::write("/tmp/probe_models.txt", out).unwrap();
    }
}
#[cfg(test)]
mod fuzz {
    use super::super::*;
    use std::path::Path;
    #[test]
    #[ignore]
    fn probe_fuzz() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/onnx-backend-tests/node");
        let mut cases: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
        cases.sort();
        let mut seed = 0x12345678u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut panics = Vec::new();
        std::panic::set_hook(Box::new(|_| {}));
        for case in &cases {
            let bytes = std::fs::read(case.join("model.onnx")).unwrap();
            for _ in 0..30 {
                let mut b = bytes.clone();
                let k = next() % 4;
                for _ in 0..=k {
                    let i = (next() as usize) % b.len();
                    b[i] = next() as u8;
                }
                if next() % 3 == 0 {
                    let cut = (next() as usize) % b.len();
                    b.truncate(cut);
                }
                let r = std::panic::catch_unwind(|| {
                    let _ = import_bytes(&b, Some(case), &ImportOptions::default());
                });
                if r.is_err() {
                    panics.push(case.display().to_string());
                    std::fs::write(format!("/tmp/fuzz_{}.onnx", panics.len()), &b).unwrap();
                }
            }
        }
        let _ = std::panic::take_hook();
        std::fs::write(
            "/tmp/fuzz.txt",
            format!("{} panics\n{}", panics.len(), panics.join("\n")),
        )
        .unwrap();
    }
}
#[cfg(test)]
mod fuzz2 {
    use super::super::proto::*;
    use super::super::*;
    use prost::Message;
    use std::path::Path;
    use std::sync::{Arc, Mutex};
    #[test]
    #[ignore]
    fn probe_fuzz2() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/onnx-backend-tests/node");
        let mut cases: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
        cases.sort();
        let mut seed = 0x2545F4914F6CDD1Du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let vals = [
            -1i64,
            0,
            1,
            2,
            3,
            -2,
            1 << 40,
            i64::MIN,
            i64::MAX,
            1 << 31,
            -(1 << 62),
            7,
        ];
        let msgs = Arc::new(Mutex::new(Vec::<String>::new()));
        let m2 = msgs.clone();
        std::panic::set_hook(Box::new(move |info| {
            m2.lock().unwrap().push(format!("{info}"));
        }));
        let mut n = 0;
        for case in &cases {
            let bytes = std::fs::read(case.join("model.onnx")).unwrap();
            let model = ModelProto::decode(bytes.as_slice()).unwrap();
            for _ in 0..200 {
                let mut m = model.clone();
                let g = m.graph.as_mut().unwrap();
                let k = next() % 5;
                for _ in 0..=k {
                    let v = vals[(next() as usize) % vals.len()];
                    match next() % 4 {
                        0 if !g.node.is_empty() => {
                            let i = (next() as usize) % g.node.len();
                            let nd = &mut g.node[i];
                            if !nd.attribute.is_empty() {
                                let j = (next() as usize) % nd.attribute.len();
                                let a = &mut nd.attribute[j];
                                if a.i.is_some() {
                                    a.i = Some(v);
                                }
                                if !a.ints.is_empty() {
                                    let l = (next() as usize) % a.ints.len();
                                    a.ints[l] = v;
                                }
                                if next() % 4 == 0 {
                                    a.ints.push(v);
                                }
                            }
                        }
                        1 if !g.initializer.is_empty() => {
                            let i = (next() as usize) % g.initializer.len();
                            let t = &mut g.initializer[i];
                            if !t.int64_data.is_empty() {
                                let l = (next() as usize) % t.int64_data.len();
                                t.int64_data[l] = v;
                            }
                            if !t.dims.is_empty() && next() % 3 == 0 {
                                let l = (next() as usize) % t.dims.len();
                                t.dims[l] = v;
                            }
                        }
                        2 if !g.input.is_empty() => {
                            let i = (next() as usize) % g.input.len();
                            if let Some(type_proto::Value::TensorType(tt)) =
                                g.input[i].r#type.as_mut().and_then(|t| t.value.as_mut())
                            {
                                if let Some(s) = tt.shape.as_mut() {
                                    if !s.dim.is_empty() {
                                        let l = (next() as usize) % s.dim.len();
                                        s.dim[l].value = Some(tensor_shape_proto::dimension::Value::DimValue(v));
                                    }
                                }
                            }
                        }
                        _ => {
                            for nd in g.node.iter_mut() {
                                if nd.op_type() == "Constant" {
                                    for a in nd.attribute.iter_mut() {
                                        if let Some(t) = a.t.as_mut() {
                                            if !t.int64_data.is_empty() {
                                                let l = (next() as usize) % t.int64_data.len();
                                                t.int64_data[l] = v;
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                let b = m.encode_to_vec();
                n += 1;
                let r = std::panic::catch_unwind(|| {
                    let _ = import_bytes(&b, Some(case), &ImportOptions::default());
                });
                if r.is_err() {
                    let l = msgs.lock().unwrap().len();
                    std::fs::write(format!("/tmp/fuzz2_{l}.onnx"), &b).unwrap();
                }
            }
        }
        let _ = std::panic::take_hook();
        let msgs = msgs.lock().unwrap();
        let mut uniq: Vec<String> = msgs
            .iter()
            .map(|m| m.lines().next().unwrap_or("").to_string())
            .collect();
        uniq.sort();
        uniq.dedup();
        std::fs::write(
            "/tmp/fuzz2.txt",
            format!("{n} runs, {} panics\n{}", msgs.len(), uniq.join("\n")),
        )
        .unwrap();
    }
}
