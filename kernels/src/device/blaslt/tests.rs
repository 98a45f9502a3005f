//! The BLASLt binding against products computed here, through a stand-in GPU runtime (the
//! CUDA driver or HIP: `tests/fixtures/fake_cuda.c`, `fake_hip.c`, each on `fake_gpu.c`) and a
//! stand-in BLASLt serving both cuBLASLt's and hipBLASLt's names and enum values
//! (`fake_blaslt.c`), compiled with `cc`, the library opened as a deployed mxc opens it
//! (`$MXC_BLASLT`), and the CUDA driver too (`$MXC_GPU_RUNTIME`). The stand-in computes what
//! NVIDIA and AMD document for the column-major arguments it is given and refuses any that
//! disagree, so a product made wrong (m and n swapped, a transpose or a stride misplaced, one
//! API's value given to the other) fails here, for either vendor.

use super::*;
use crate::device::Gpu;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Both vendors, whose libraries each test checks in turn.
const VENDORS: [Vendor; 2] = [Vendor::Nvidia, Vendor::Amd];

/// The stand-ins, built once; the variables naming them are set then and never changed (no
/// other test of this crate reads them).
struct Fakes {
    _dir: tempfile::TempDir,
    hip: PathBuf,
    /// The stand-in BLASLt, for its counters.
    blaslt: libloading::Library,
}

fn build(dir: &Path, sources: &[&str], name: &str, libs: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let cc = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .args(sources.iter().map(|s| fixtures.join(s)))
        .args(libs)
        .output()
        .expect("cc (a C compiler) is needed to build the stand-ins");
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
    out
}

fn fakes() -> &'static Fakes {
    static FAKES: OnceLock<Fakes> = OnceLock::new();
    FAKES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let runtime = |source, name| build(dir.path(), &[source, "fake_gpu.c"], name, &["-ldl"]);
        let cuda = runtime("fake_cuda.c", "libcuda-fake.so");
        let hip = runtime("fake_hip.c", "libamdhip64-fake.so");
        let blaslt = build(dir.path(), &["fake_blaslt.c"], "libblaslt-fake.so", &[]);
        std::env::set_var("MXC_GPU_RUNTIME", &cuda);
        std::env::set_var("MXC_BLASLT", &blaslt);
        // SAFETY: the stand-in has no initialisers.
        let blaslt = unsafe { libloading::Library::new(&blaslt) }.unwrap();
        Fakes { _dir: dir, hip, blaslt }
    })
}

/// A counter the stand-in BLASLt keeps.
fn counter(name: &str) -> i64 {
    // SAFETY: the stand-in's counters take nothing and return a long.
    unsafe {
        fakes()
            .blaslt
            .get::<unsafe extern "C" fn() -> i64>(name.as_bytes())
            .unwrap()()
    }
}

/// The device of `vendor` (NVIDIA's found as at run time) and its library; held one test at a
/// time, so the stand-in's counters count one test's calls.
fn device(vendor: Vendor) -> (MutexGuard<'static, ()>, Gpu, BlasLt) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let fakes = fakes();
    let gpu = match vendor {
        Vendor::Nvidia => Gpu::find().unwrap(),
        Vendor::Amd => Gpu::open_library(fakes.hip.to_str().unwrap(), vendor).unwrap(),
    };
    assert_eq!(gpu.vendor, vendor);
    let blaslt = BlasLt::open(vendor).unwrap();
    assert!(blaslt.path.ends_with("libblaslt-fake.so"), "{}", blaslt.path);
    (guard, gpu, blaslt)
}

/// `n` values, different for each `seed`, none zero.
fn values(n: u64, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 + seed * 11) % 23) as f32 * 0.25 - 2.875)
        .collect()
}

/// A product of `batch` `m x k` by `k x n` matrices, each operand a matrix per product.
fn call(batch: u64, m: u64, n: u64, k: u64) -> MatmulCall {
    MatmulCall {
        batch,
        m,
        n,
        k,
        trans_a: false,
        trans_b: false,
        stride_a: m * k,
        stride_b: k * n,
        alpha: 1.0,
        a: 0,
        b: 1,
        bias: None,
        activation: Activation::None,
    }
}

/// The elements an operand of `batch` products, `size` each, `stride` apart, spans.
fn extent(batch: u64, stride: u64, size: u64) -> u64 {
    (batch - 1) * stride + size
}

/// What `c` computes, by its definition (`MatmulCall`), in f64.
fn reference(c: &MatmulCall, a: &[f32], b: &[f32], bias: Option<&[f32]>) -> Vec<f64> {
    let (m, n, k) = (c.m as usize, c.n as usize, c.k as usize);
    let mut out = Vec::new();
    for p in 0..c.batch as usize {
        let (a, b) = (&a[p * c.stride_a as usize..], &b[p * c.stride_b as usize..]);
        for i in 0..m {
            for j in 0..n {
                let x = |l: usize| if c.trans_a { a[l * m + i] } else { a[i * k + l] } as f64;
                let y = |l: usize| if c.trans_b { b[j * k + l] } else { b[l * n + j] } as f64;
                let v = c.alpha as f64 * (0..k).map(|l| x(l) * y(l)).sum::<f64>() + bias.map_or(0.0, |b| b[j] as f64);
                out.push(match c.activation {
                    Activation::None => v,
                    Activation::Relu => v.max(0.0),
                });
            }
        }
    }
    out
}

/// `c` run through the library on `a`, `b` and `bias`, each placed `offset` bytes into an
/// allocation of its own; the result.
fn through_library(
    gpu: &Gpu,
    blaslt: &BlasLt,
    c: &MatmulCall,
    a: &[f32],
    b: &[f32],
    bias: Option<&[f32]>,
    offset: u64,
) -> Vec<f32> {
    let driver = &gpu.driver;
    let mut allocations = Vec::new();
    let mut place = |bytes: usize| {
        let at = driver.alloc(bytes + 256).unwrap();
        allocations.push(at);
        at + offset
    };
    let mut args = Vec::new();
    for xs in [Some(a), Some(b), bias].into_iter().flatten() {
        let at = place(xs.len() * 4);
        let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
        driver.upload(at, &bytes).unwrap();
        args.push(at);
    }
    let len = (c.batch * c.m * c.n) as usize;
    args.push(place(len * 4));
    let workspace = Workspace {
        at: place(WORKSPACE_BYTES),
        bytes: WORKSPACE_BYTES,
    };
    let matmuls = counter("fake_blaslt_matmuls");
    let matmul = blaslt
        .prepare(c, &args, workspace)
        .unwrap_or_else(|e| panic!("{:?} {c:?}: {e}", gpu.vendor));
    matmul.run().unwrap_or_else(|e| panic!("{:?} {c:?}: {e}", gpu.vendor));
    assert_eq!(counter("fake_blaslt_matmuls"), matmuls + 1, "one product computed");
    let mut bytes = vec![0; len * 4];
    driver.download(args[args.len() - 1], &mut bytes).unwrap();
    for at in allocations {
        driver.free(at);
    }
    bytes
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Runs `c` through the library and checks it against `reference`.
fn check(gpu: &Gpu, blaslt: &BlasLt, c: &MatmulCall, offset: u64) {
    let a = values(extent(c.batch, c.stride_a, c.m * c.k), 1);
    let b = values(extent(c.batch, c.stride_b, c.k * c.n), 2);
    let bias = c.bias.map(|_| values(c.n, 3));
    let got = through_library(gpu, blaslt, c, &a, &b, bias.as_deref(), offset);
    let want = reference(c, &a, &b, bias.as_deref());
    assert_eq!(got.len(), want.len(), "{c:?}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{:?} {c:?}: element {i} is {g}, not {w}",
            gpu.vendor
        );
    }
}

/// `test` on each vendor's device and library.
fn each_vendor(test: impl Fn(&Gpu, &BlasLt)) {
    for vendor in VENDORS {
        let (_one, gpu, blaslt) = device(vendor);
        test(&gpu, &blaslt);
    }
}

#[test]
fn row_major_products_with_and_without_transposes_match_the_host() {
    each_vendor(|gpu, blaslt| {
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            let c = MatmulCall {
                trans_a,
                trans_b,
                ..call(1, 3, 5, 4)
            };
            check(gpu, blaslt, &c, 0);
        }
    });
}

#[test]
fn batched_products_share_or_step_through_their_operands() {
    each_vendor(|gpu, blaslt| {
        let each = call(3, 2, 5, 4);
        for (stride_a, stride_b) in [(8, 20), (8, 0), (0, 20)] {
            let c = MatmulCall {
                stride_a,
                stride_b,
                ..each.clone()
            };
            check(gpu, blaslt, &c, 0);
            let c = MatmulCall { trans_b: true, ..c };
            check(gpu, blaslt, &c, 0);
        }
    });
}

#[test]
fn the_epilogue_adds_the_bias_then_relu() {
    each_vendor(|gpu, blaslt| {
        for bias in [None, Some(2)] {
            for activation in [Activation::None, Activation::Relu] {
                let c = MatmulCall {
                    bias,
                    activation,
                    ..call(2, 4, 3, 5)
                };
                check(gpu, blaslt, &c, 0);
            }
        }
    });
}

#[test]
fn alpha_scales_the_product_and_not_the_bias() {
    each_vendor(|gpu, blaslt| {
        for alpha in [0.5, -2.0] {
            let c = MatmulCall {
                alpha,
                bias: Some(2),
                trans_a: true,
                ..call(1, 6, 2, 3)
            };
            check(gpu, blaslt, &c, 0);
        }
    });
}

#[test]
fn buffers_less_aligned_than_the_default_are_declared_so() {
    // the stand-in, as cuBLASLt, refuses a buffer less aligned than the heuristic was told
    // (hipBLASLt is told nothing, and asks no more than an f32's alignment)
    each_vendor(|gpu, blaslt| {
        for offset in [4, 64] {
            check(gpu, blaslt, &call(2, 3, 5, 4), offset);
        }
    });
}

#[test]
fn descriptors_are_made_once_per_step_and_destroyed_with_it() {
    for vendor in VENDORS {
        let (_one, gpu, blaslt) = device(vendor);
        // the handle
        assert_eq!(counter("fake_blaslt_live_objects"), 1);
        let c = call(1, 2, 2, 2);
        let args = [0x1000, 0x2000, 0x3000];
        let workspace = Workspace {
            at: 0x10000,
            bytes: WORKSPACE_BYTES,
        };
        let matmul = blaslt.prepare(&c, &args, workspace).unwrap();
        // a matmul descriptor and three layouts; the preference is gone
        assert_eq!(counter("fake_blaslt_live_objects"), 5);
        drop(matmul);
        assert_eq!(counter("fake_blaslt_live_objects"), 1);
        drop(blaslt);
        drop(gpu);
        assert_eq!(counter("fake_blaslt_live_objects"), 0, "{vendor:?}");
    }
}

#[test]
fn a_call_the_library_refuses_is_an_error_naming_the_call_and_status() {
    let refused = [
        "cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_INVALID_VALUE (cuBLASLt status 7)",
        "hipblasLtMatmulAlgoGetHeuristic: HIPBLAS_STATUS_INVALID_VALUE (hipBLASLt status 3)",
    ];
    for (vendor, refused) in VENDORS.into_iter().zip(refused) {
        let (_one, _gpu, blaslt) = device(vendor);
        let workspace = Workspace {
            at: 0x10000,
            bytes: WORKSPACE_BYTES,
        };
        let err = blaslt
            .prepare(&call(1, 0, 2, 2), &[0x1000, 0x2000, 0x3000], workspace)
            .err()
            .expect("no rows refused");
        assert_eq!(err, refused);
        assert_eq!(counter("fake_blaslt_live_objects"), 1, "what was made is destroyed");
    }
}
