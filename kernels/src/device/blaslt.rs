//! hipBLASLt (AMD GPUs) and cuBLASLt (NVIDIA GPUs), reached at run time as the GPU runtimes
//! are (`library.rs`): `libhipblaslt.so` (`.so.1`, `.so.0`) under `$ROCM_PATH/lib`,
//! `/opt/rocm/lib` and the loader's path; `libcublasLt.so.13` (`.12`, `.11`, unversioned) under
//! `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64` and the loader's path; or the library
//! `$MXC_BLASLT` names, taken to be the API of the GPU in use. Both APIs have the calls mxc
//! makes with the same C signatures and names after their prefix (`cublasLt…`, `hipblasLt…`),
//! so one table of function pointers serves both; what differs is said by `Api`: the enum
//! values (each from the vendor's header, named there) and the size of the algorithm structure.
//! hipBLASLt's values are those of ROCm 6 and later (`hipDataType`, `hipblasComputeType_t`).
//!
//! A `blaslt.matmul` call multiplies row-major matrices; the libraries compute column-major
//! ones, and a row-major matrix is its transpose column-major, so C = A·B is computed as
//! Cᵀ = Bᵀ·Aᵀ: B goes in as the library's A and A as its B, m and n swap, and the bias (one
//! value per column of C) runs along the rows of the library's D, as its BIAS epilogue adds
//! it. Each step's descriptors, layouts and algorithm (the heuristic's best for the shared
//! workspace and the buffers' alignment) are made once at load, for the step's buffers, and
//! destroyed when the step's `Matmul` is dropped.

use super::library::{self, Workspace};
use super::{symbol, DevicePtr, Handle, Vendor};
use mxc_dialects::mx::call::{Activation, MatmulCall};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// The scratch memory each step may use (the heuristic picks algorithms that need no more).
pub(crate) const WORKSPACE_BYTES: usize = 32 << 20;

type Status = c_int;
type Create = unsafe extern "C" fn(*mut *mut c_void) -> Status;
type Destroy = unsafe extern "C" fn(*mut c_void) -> Status;
type SetAttribute = unsafe extern "C" fn(*mut c_void, c_int, *const c_void, usize) -> Status;
type Heuristic = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    c_int,
    *mut c_void,
    *mut c_int,
) -> Status;
type MatmulFn = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    *const c_void,
    *const c_void,
    *mut c_void,
    *const c_void,
    *mut c_void,
    *const c_void,
    *const c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *const c_void,
    *mut c_void,
    usize,
    *mut c_void,
) -> Status;

/// The calls mxc makes, by their names after the vendor's prefix.
struct Functions {
    /// `Create(handle*)`, `Destroy(handle)`.
    create: Create,
    destroy: Destroy,
    /// `MatmulDescCreate(desc*, computeType, scaleType)`.
    desc_create: unsafe extern "C" fn(*mut *mut c_void, c_int, c_int) -> Status,
    desc_destroy: Destroy,
    desc_set: SetAttribute,
    /// `MatrixLayoutCreate(layout*, type, rows, cols, ld)`.
    layout_create: unsafe extern "C" fn(*mut *mut c_void, c_int, u64, u64, i64) -> Status,
    layout_destroy: Destroy,
    layout_set: SetAttribute,
    pref_create: Create,
    pref_destroy: Destroy,
    pref_set: SetAttribute,
    /// `MatmulAlgoGetHeuristic(handle, desc, A, B, C, D, pref, requested, results, returned*)`.
    heuristic: Heuristic,
    /// `Matmul(handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo,
    /// workspace, workspaceBytes, stream)`.
    matmul: MatmulFn,
}

/// What differs between the two APIs: names, enum values, one structure's size.
struct Api {
    /// The library's name, for messages.
    name: &'static str,
    /// The prefix of every function's name.
    prefix: &'static str,
    /// `*_OP_N`, `*_OP_T`.
    op: [c_int; 2],
    /// f32 as a data type (`CUDA_R_32F`, `HIP_R_32F`) and as a compute type
    /// (`CUBLAS_COMPUTE_32F`, `HIPBLAS_COMPUTE_32F`).
    r_32f: c_int,
    compute_32f: c_int,
    /// `*_MATMUL_DESC_TRANSA`, `_TRANSB`, `_EPILOGUE`, `_BIAS_POINTER`.
    desc_transa: c_int,
    desc_transb: c_int,
    desc_epilogue: c_int,
    desc_bias_pointer: c_int,
    /// `*_MATRIX_LAYOUT_BATCH_COUNT`, `_STRIDED_BATCH_OFFSET`.
    layout_batch_count: c_int,
    layout_batch_offset: c_int,
    /// `*_MATMUL_PREF_MAX_WORKSPACE_BYTES`.
    pref_max_workspace: c_int,
    /// `CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES` to `_D_BYTES` (hipBLASLt has none: its
    /// heuristic takes the pointers as they come).
    pref_min_alignment: Option<[c_int; 4]>,
    /// The bytes of `*MatmulAlgo_t`, the first member of the heuristic's result structure
    /// `{ algo; size_t workspaceSize; status state; float wavesCount; int reserved[4]; }`.
    algo_bytes: usize,
    /// The status codes' names.
    statuses: &'static [(Status, &'static str)],
}

/// From CUDA's `cublasLt.h` (`cublasLtMatmulDescAttributes_t`, `cublasLtMatrixLayoutAttribute_t`,
/// `cublasLtMatmulPreferenceAttributes_t`, `cublasLtMatmulAlgo_t` = `uint64_t data[8]`),
/// `cublas_api.h` (`cublasOperation_t`, `cublasComputeType_t`, `cublasStatus_t`) and
/// `library_types.h` (`cudaDataType_t`); the same in CUDA 11, 12 and 13.
const CUBLASLT: Api = Api {
    name: "cuBLASLt",
    prefix: "cublasLt",
    op: [0, 1],
    r_32f: 0,
    compute_32f: 68,
    desc_transa: 3,
    desc_transb: 4,
    desc_epilogue: 7,
    desc_bias_pointer: 8,
    layout_batch_count: 5,
    layout_batch_offset: 6,
    pref_max_workspace: 1,
    pref_min_alignment: Some([5, 6, 7, 8]),
    algo_bytes: 64,
    statuses: &[
        (1, "CUBLAS_STATUS_NOT_INITIALIZED"),
        (3, "CUBLAS_STATUS_ALLOC_FAILED"),
        (7, "CUBLAS_STATUS_INVALID_VALUE"),
        (8, "CUBLAS_STATUS_ARCH_MISMATCH"),
        (11, "CUBLAS_STATUS_MAPPING_ERROR"),
        (13, "CUBLAS_STATUS_EXECUTION_FAILED"),
        (14, "CUBLAS_STATUS_INTERNAL_ERROR"),
        (15, "CUBLAS_STATUS_NOT_SUPPORTED"),
        (16, "CUBLAS_STATUS_LICENSE_ERROR"),
    ],
};

/// From ROCm's `hipblaslt.h` (ROCm/hipBLASLt `library/include/hipblaslt.h`:
/// `hipblasLtMatmulDescAttributes_t`, `hipblasLtMatrixLayoutAttribute_t`,
/// `hipblasLtMatmulPreferenceAttributes_t`, `hipblasLtMatmulAlgo_t` = `uint8_t data[16]; size_t
/// max_workspace_bytes`), `hipblas-common.h` (ROCm/hipBLAS-common: `hipblasOperation_t`,
/// `hipblasComputeType_t`, `hipblasStatus_t`) and HIP's `library_types.h` (`hipDataType`).
const HIPBLASLT: Api = Api {
    name: "hipBLASLt",
    prefix: "hipblasLt",
    op: [111, 112],
    r_32f: 0,
    compute_32f: 2,
    desc_transa: 0,
    desc_transb: 1,
    desc_epilogue: 2,
    desc_bias_pointer: 3,
    layout_batch_count: 0,
    layout_batch_offset: 1,
    pref_max_workspace: 1,
    pref_min_alignment: None,
    algo_bytes: 24,
    statuses: &[
        (1, "HIPBLAS_STATUS_NOT_INITIALIZED"),
        (2, "HIPBLAS_STATUS_ALLOC_FAILED"),
        (3, "HIPBLAS_STATUS_INVALID_VALUE"),
        (4, "HIPBLAS_STATUS_MAPPING_ERROR"),
        (5, "HIPBLAS_STATUS_EXECUTION_FAILED"),
        (6, "HIPBLAS_STATUS_INTERNAL_ERROR"),
        (7, "HIPBLAS_STATUS_NOT_SUPPORTED"),
        (8, "HIPBLAS_STATUS_ARCH_MISMATCH"),
        (9, "HIPBLAS_STATUS_HANDLE_IS_NULLPTR"),
        (10, "HIPBLAS_STATUS_INVALID_ENUM"),
        (11, "HIPBLAS_STATUS_UNKNOWN"),
    ],
};

/// `*_EPILOGUE_DEFAULT`, `_RELU`, `_BIAS`, `_RELU_BIAS`: the same values in both headers
/// (`cublasLtEpilogue_t`, `hipblasLtEpilogue_t`).
fn epilogue(bias: bool, activation: Activation) -> u32 {
    match (bias, activation) {
        (false, Activation::None) => 1,
        (false, Activation::Relu) => 2,
        (true, Activation::None) => 4,
        (true, Activation::Relu) => 6,
    }
}

impl Api {
    fn of(vendor: Vendor) -> &'static Api {
        match vendor {
            Vendor::Amd => &HIPBLASLT,
            Vendor::Nvidia => &CUBLASLT,
        }
    }

    /// `Ok` for status 0, else the status's name, naming `call`.
    fn check(&self, status: Status, call: &str) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        let name = self
            .statuses
            .iter()
            .find(|(s, _)| *s == status)
            .map_or("an unknown status", |(_, n)| n);
        Err(format!("{}{call}: {name} ({} status {status})", self.prefix, self.name))
    }
}

/// An opened library and its handle, destroyed last (every `Matmul` holds it).
struct Library {
    f: Functions,
    api: &'static Api,
    handle: Handle,
    // declared last: the function pointers above point into it
    _library: libloading::Library,
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle `BlasLt::open` created, destroyed once, after every descriptor.
        unsafe { (self.f.destroy)(self.handle.0) };
    }
}

/// hipBLASLt or cuBLASLt, opened, with a handle made.
pub(crate) struct BlasLt {
    library: Arc<Library>,
    /// The library's path as it was opened.
    pub path: String,
}

impl BlasLt {
    /// The BLASLt library of `vendor`'s GPUs (or `$MXC_BLASLT`), with a handle made; an error
    /// naming every place looked, or what failed.
    pub fn open(vendor: Vendor) -> Result<BlasLt, String> {
        let api = Api::of(vendor);
        let (library, path) = match vendor {
            Vendor::Amd => library::open(
                api.name,
                "MXC_BLASLT",
                &library::rocm_folders(),
                &["libhipblaslt.so", "libhipblaslt.so.1", "libhipblaslt.so.0"],
            ),
            Vendor::Nvidia => library::open(
                api.name,
                "MXC_BLASLT",
                &library::cuda_folders(),
                &[
                    "libcublasLt.so.13",
                    "libcublasLt.so.12",
                    "libcublasLt.so.11",
                    "libcublasLt.so",
                ],
            ),
        }?;
        let failed = |e: String| format!("{} {path}: {e}", api.name);
        let f = functions(&library, api.prefix).map_err(failed)?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: `handle` is a valid output.
        api.check(unsafe { (f.create)(&mut handle) }, "Create")
            .map_err(failed)?;
        let library = Arc::new(Library {
            f,
            api,
            handle: Handle(handle),
            _library: library,
        });
        Ok(BlasLt { library, path })
    }

    /// `call` made ready to run on the step's buffers, `args` (their device addresses:
    /// operands, then the result), with `workspace`; an error where the library refuses it or
    /// has no algorithm for it.
    pub fn prepare(&self, call: &MatmulCall, args: &[DevicePtr], workspace: Workspace) -> Result<Matmul, String> {
        let operand = |i: usize| args[..args.len() - 1][i];
        let mut matmul = Matmul {
            library: self.library.clone(),
            desc: Handle(std::ptr::null_mut()),
            layouts: Vec::new(),
            algo: [0; HEURISTIC_WORDS],
            alpha: call.alpha,
            // the library's A is our B, its B our A
            pointers: [operand(call.b), operand(call.a), args[args.len() - 1]],
            workspace,
        };
        // on an error, dropping `matmul` destroys what was made so far
        matmul.describe(call, call.bias.map(operand))?;
        Ok(matmul)
    }
}

/// The calls of `library`, by the names `prefix` starts.
fn functions(library: &libloading::Library, prefix: &str) -> Result<Functions, String> {
    let lib = library;
    let name = |call: &str| format!("{prefix}{call}");
    // SAFETY: each type is the C signature both APIs give the function named.
    unsafe {
        Ok(Functions {
            create: symbol(lib, &name("Create"))?,
            destroy: symbol(lib, &name("Destroy"))?,
            desc_create: symbol(lib, &name("MatmulDescCreate"))?,
            desc_destroy: symbol(lib, &name("MatmulDescDestroy"))?,
            desc_set: symbol(lib, &name("MatmulDescSetAttribute"))?,
            layout_create: symbol(lib, &name("MatrixLayoutCreate"))?,
            layout_destroy: symbol(lib, &name("MatrixLayoutDestroy"))?,
            layout_set: symbol(lib, &name("MatrixLayoutSetAttribute"))?,
            pref_create: symbol(lib, &name("MatmulPreferenceCreate"))?,
            pref_destroy: symbol(lib, &name("MatmulPreferenceDestroy"))?,
            pref_set: symbol(lib, &name("MatmulPreferenceSetAttribute"))?,
            heuristic: symbol(lib, &name("MatmulAlgoGetHeuristic"))?,
            matmul: symbol(lib, &name("Matmul"))?,
        })
    }
}

/// Words of the buffer the heuristic writes its result into: more than either API's structure.
const HEURISTIC_WORDS: usize = 16;

/// One step's product, ready to run on its buffers.
pub(crate) struct Matmul {
    library: Arc<Library>,
    desc: Handle,
    /// The library's A, B and D (also its C, which beta = 0 leaves unread).
    layouts: Vec<Handle>,
    /// The heuristic's result, whose first member is the algorithm.
    algo: [u64; HEURISTIC_WORDS],
    alpha: f32,
    /// The library's A, B and D.
    pointers: [DevicePtr; 3],
    workspace: Workspace,
}

/// A matrix as the library sees it: column-major, `rows x cols`, packed (its leading dimension
/// is its rows), each matrix of a batch `stride` elements after the one before.
struct Layout {
    rows: u64,
    cols: u64,
    stride: u64,
}

impl Matmul {
    fn describe(&mut self, call: &MatmulCall, bias: Option<DevicePtr>) -> Result<(), String> {
        let lib = &*self.library;
        let (api, f) = (lib.api, &lib.f);
        let (m, n, k) = (call.m, call.n, call.k);
        // our B (k x n, or n x k when trans_b) read column-major is Bᵀ (n x k), or B itself
        let (rows, cols) = if call.trans_b { (k, n) } else { (n, k) };
        let a = Layout {
            rows,
            cols,
            stride: call.stride_b,
        };
        // our A (m x k, or k x m when trans_a) read column-major is Aᵀ (k x m), or A itself
        let (rows, cols) = if call.trans_a { (m, k) } else { (k, m) };
        let b = Layout {
            rows,
            cols,
            stride: call.stride_a,
        };
        let d = Layout {
            rows: n,
            cols: m,
            stride: m * n,
        };
        let batch = i32::try_from(call.batch).map_err(|_| format!("a batch of {} products is too many", call.batch))?;
        let mut desc = std::ptr::null_mut();
        // SAFETY: a valid output; the API's own enum values.
        api.check(
            unsafe { (f.desc_create)(&mut desc, api.compute_32f, api.r_32f) },
            "MatmulDescCreate",
        )?;
        self.desc = Handle(desc);
        let set = |attr: c_int, value: &[u8]| {
            // SAFETY: the descriptor made above; `value` holds the attribute's C type.
            let status = unsafe { (f.desc_set)(desc, attr, value.as_ptr().cast(), value.len()) };
            api.check(status, "MatmulDescSetAttribute")
        };
        set(api.desc_transa, &api.op[call.trans_b as usize].to_ne_bytes())?;
        set(api.desc_transb, &api.op[call.trans_a as usize].to_ne_bytes())?;
        set(
            api.desc_epilogue,
            &epilogue(bias.is_some(), call.activation).to_ne_bytes(),
        )?;
        if let Some(bias) = bias {
            set(api.desc_bias_pointer, &(bias as usize).to_ne_bytes())?;
        }
        for l in [&a, &b, &d] {
            let layout = self.layout(l, batch)?;
            self.layouts.push(layout);
        }
        self.choose_algorithm([&a, &b, &d, &d])
    }

    /// A layout made for `l`, `batch` deep.
    fn layout(&self, l: &Layout, batch: i32) -> Result<Handle, String> {
        let lib = &*self.library;
        let (api, f) = (lib.api, &lib.f);
        let ld = i64::try_from(l.rows).map_err(|_| format!("a leading dimension of {} is too large", l.rows))?;
        let stride = i64::try_from(l.stride).map_err(|_| format!("a batch stride of {} is too large", l.stride))?;
        let mut layout = std::ptr::null_mut();
        // SAFETY: a valid output; sizes the call checked (`LibraryCall::decode`).
        let status = unsafe { (f.layout_create)(&mut layout, api.r_32f, l.rows, l.cols, ld) };
        api.check(status, "MatrixLayoutCreate")?;
        let set = |attr: c_int, value: &[u8]| {
            // SAFETY: the layout made above; `value` holds the attribute's C type.
            let status = unsafe { (f.layout_set)(layout, attr, value.as_ptr().cast(), value.len()) };
            api.check(status, "MatrixLayoutSetAttribute")
        };
        let attributes = set(api.layout_batch_count, &batch.to_ne_bytes())
            .and_then(|()| set(api.layout_batch_offset, &stride.to_ne_bytes()));
        if let Err(e) = attributes {
            // SAFETY: the layout made above, not kept.
            unsafe { (f.layout_destroy)(layout) };
            return Err(e);
        }
        Ok(Handle(layout))
    }

    /// Asks the heuristic for the best algorithm for the workspace and, where the API takes
    /// them, the alignments of the library's A, B, C and D (`layouts`, with `self.pointers`).
    fn choose_algorithm(&mut self, layouts: [&Layout; 4]) -> Result<(), String> {
        let lib = &*self.library;
        let (api, f) = (lib.api, &lib.f);
        let mut pref = std::ptr::null_mut();
        // SAFETY: a valid output.
        api.check(unsafe { (f.pref_create)(&mut pref) }, "MatmulPreferenceCreate")?;
        let set = |attr: c_int, value: &[u8]| {
            // SAFETY: the preference made above; `value` holds the attribute's C type.
            let status = unsafe { (f.pref_set)(pref, attr, value.as_ptr().cast(), value.len()) };
            api.check(status, "MatmulPreferenceSetAttribute")
        };
        let pointers = [self.pointers[0], self.pointers[1], self.pointers[2], self.pointers[2]];
        let mut result = set(api.pref_max_workspace, &(self.workspace.bytes as u64).to_ne_bytes());
        for (i, attr) in api.pref_min_alignment.into_iter().flatten().enumerate() {
            let align = alignment(pointers[i], layouts[i]);
            result = result.and_then(|()| set(attr, &align.to_ne_bytes()));
        }
        let mut returned: c_int = 0;
        let [a, b, d] = [self.layouts[0].0, self.layouts[1].0, self.layouts[2].0];
        result = result.and_then(|()| {
            // SAFETY: the descriptors made above; room for one result of either API's layout.
            let status = unsafe {
                (f.heuristic)(
                    lib.handle.0,
                    self.desc.0,
                    a,
                    b,
                    d,
                    d,
                    pref,
                    1,
                    self.algo.as_mut_ptr().cast(),
                    &mut returned,
                )
            };
            api.check(status, "MatmulAlgoGetHeuristic")
        });
        // SAFETY: the preference made above, used only by the heuristic.
        unsafe { (f.pref_destroy)(pref) };
        result?;
        // after the algorithm: `size_t workspaceSize`, then the status `state`
        let bytes: Vec<u8> = self.algo.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let at = api.algo_bytes;
        let needs = u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let state = Status::from_ne_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        if returned < 1 || state != 0 {
            api.check(state, "MatmulAlgoGetHeuristic")?;
            return Err(format!("{} has no algorithm for it", api.name));
        }
        if needs > self.workspace.bytes as u64 {
            return Err(format!(
                "{}'s algorithm needs {needs} bytes of workspace, more than the {} asked for",
                api.name, self.workspace.bytes
            ));
        }
        Ok(())
    }

    /// Runs the product on the default stream.
    pub fn run(&self) -> Result<(), String> {
        let lib = &*self.library;
        let (alpha, beta) = (self.alpha, 0f32);
        let [a, b, d] = self.pointers.map(|p| p as usize as *mut c_void);
        let [la, lb, ld] = [self.layouts[0].0, self.layouts[1].0, self.layouts[2].0];
        // SAFETY: descriptors and algorithm made for these buffers (whose sizes the plan
        // checked against the call: `Program::validate`) and this workspace.
        let status = unsafe {
            (lib.f.matmul)(
                lib.handle.0,
                self.desc.0,
                (&alpha as *const f32).cast(),
                a,
                la,
                b,
                lb,
                (&beta as *const f32).cast(),
                d,
                ld,
                d,
                ld,
                self.algo.as_ptr().cast(),
                self.workspace.at as usize as *mut c_void,
                self.workspace.bytes,
                std::ptr::null_mut(),
            )
        };
        lib.api.check(status, "Matmul")
    }
}

impl Drop for Matmul {
    fn drop(&mut self) {
        let f = &self.library.f;
        // SAFETY: descriptors `describe` made, each destroyed once (a null one was never made).
        unsafe {
            for layout in &self.layouts {
                (f.layout_destroy)(layout.0);
            }
            if !self.desc.0.is_null() {
                (f.desc_destroy)(self.desc.0);
            }
        }
    }
}

/// The alignment in bytes (at most 256, the libraries' default) that matrix `l` at `at` keeps:
/// of its address, its columns and its batch's matrices.
fn alignment(at: DevicePtr, l: &Layout) -> u32 {
    let f32_bytes = 4;
    let all = at | (l.rows * f32_bytes) | (l.stride * f32_bytes);
    1 << all.trailing_zeros().min(8)
}

#[cfg(test)]
mod tests;
