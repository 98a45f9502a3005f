//! MIOpen, AMD's library of neural-network kernels, for `miopen.conv_forward` calls: reached at
//! run time as the GPU runtimes are (`library.rs`): `libMIOpen.so` (`.so.1`) under
//! `$ROCM_PATH/lib`, `/opt/rocm/lib` and the loader's path, or the library `$MXC_MIOPEN` names.
//! Only the C functions mxc calls are declared, by their signatures in MIOpen's
//! `include/miopen/miopen.h` (ROCm/MIOpen), and the one structure it reads,
//! `miopenConvAlgoPerf_t`. Each step's tensor and convolution descriptors (f32 NCHW tensors,
//! pads, strides, dilations, the group count) are made once at load; the forward algorithm is
//! found then (`miopenFindConvolutionForwardAlgorithm`, not exhaustive, on the step's own
//! buffers) with a workspace shared by the program's steps; a run is
//! `miopenConvolutionForward` with alpha 1 and beta 0, then `miopenConvolutionForwardBias`
//! when the call has a bias (y += b, the only form it supports: alpha 1, beta 0).
//!
//! Without an AMD GPU it runs against a stand-in (`tests/fixtures/fake_miopen.c`, through
//! `tests/suite/gpu_amd.rs`) that checks each call against `miopen.h` and computes the
//! convolution on the host; it has not run against MIOpen itself.

use super::library::{self, Workspace};
use super::{symbol, DevicePtr, Handle};
use mxc_dialects::mx::call::ConvCall;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Arc;

/// `miopenStatus_t`; `miopenStatusSuccess` is 0.
type Status = c_int;
type Create = unsafe extern "C" fn(*mut *mut c_void) -> Status;
type Destroy = unsafe extern "C" fn(*mut c_void) -> Status;
type Find = unsafe extern "C" fn(
    *mut c_void,
    *mut c_void,
    *const c_void,
    *mut c_void,
    *const c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    c_int,
    *mut c_int,
    *mut AlgoPerf,
    *mut c_void,
    usize,
    bool,
) -> Status;
type Forward = unsafe extern "C" fn(
    *mut c_void,
    *const c_void,
    *mut c_void,
    *const c_void,
    *mut c_void,
    *const c_void,
    *mut c_void,
    c_int,
    *const c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    usize,
) -> Status;

/// `miopenDataType_t::miopenFloat`.
const FLOAT: c_int = 1;
/// `miopenConvolutionMode_t::miopenConvolution` (cross-correlation, as ONNX's Conv).
const CONVOLUTION: c_int = 0;

/// `miopenConvAlgoPerf_t`: a union of the algorithm enums (`fwd_algo`, a
/// `miopenConvFwdAlgorithm_t`, for the forward direction), `float time`, `size_t memory`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct AlgoPerf {
    fwd_algo: c_int,
    time: f32,
    memory: usize,
}

struct Functions {
    /// `miopenCreate(miopenHandle_t*)`, `miopenDestroy(handle)`.
    create: Create,
    destroy: Destroy,
    /// `miopenGetErrorString(status)`.
    error_string: unsafe extern "C" fn(Status) -> *const c_char,
    /// `miopenCreateTensorDescriptor(desc*)`, `miopenSet4dTensorDescriptor(desc, dataType, n, c,
    /// h, w)`, `miopenDestroyTensorDescriptor(desc)`.
    tensor_create: Create,
    tensor_set_4d: unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, c_int, c_int) -> Status,
    tensor_destroy: Destroy,
    /// `miopenCreateConvolutionDescriptor(desc*)`, `miopenInitConvolutionDescriptor(desc, mode,
    /// pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w)`,
    /// `miopenSetConvolutionGroupCount(desc, groupCount)`,
    /// `miopenDestroyConvolutionDescriptor(desc)`.
    conv_create: Create,
    conv_init: unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, c_int, c_int, c_int, c_int) -> Status,
    conv_groups: unsafe extern "C" fn(*mut c_void, c_int) -> Status,
    conv_destroy: Destroy,
    /// `miopenGetConvolutionForwardOutputDim(convDesc, xDesc, wDesc, n*, c*, h*, w*)`.
    output_dim: unsafe extern "C" fn(
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut c_int,
        *mut c_int,
        *mut c_int,
        *mut c_int,
    ) -> Status,
    /// `miopenConvolutionForwardGetWorkSpaceSize(handle, wDesc, xDesc, convDesc, yDesc, bytes*)`.
    workspace_size:
        unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void, *mut c_void, *mut c_void, *mut usize) -> Status,
    /// `miopenFindConvolutionForwardAlgorithm(handle, xDesc, x, wDesc, w, convDesc, yDesc, y,
    /// requestAlgoCount, returnedAlgoCount*, perfResults*, workSpace, workSpaceSize,
    /// exhaustiveSearch)`.
    find: Find,
    /// `miopenConvolutionForward(handle, alpha, xDesc, x, wDesc, w, convDesc, algo, beta, yDesc,
    /// y, workSpace, workSpaceSize)`.
    forward: Forward,
    /// `miopenConvolutionForwardBias(handle, alpha, bDesc, b, beta, yDesc, y)`.
    forward_bias: unsafe extern "C" fn(
        *mut c_void,
        *const c_void,
        *mut c_void,
        *const c_void,
        *const c_void,
        *mut c_void,
        *mut c_void,
    ) -> Status,
}

/// The calls of `library`.
fn functions(library: &libloading::Library) -> Result<Functions, String> {
    let lib = library;
    // SAFETY: each type is the signature `miopen.h` gives the function named.
    unsafe {
        Ok(Functions {
            create: symbol(lib, "miopenCreate")?,
            destroy: symbol(lib, "miopenDestroy")?,
            error_string: symbol(lib, "miopenGetErrorString")?,
            tensor_create: symbol(lib, "miopenCreateTensorDescriptor")?,
            tensor_set_4d: symbol(lib, "miopenSet4dTensorDescriptor")?,
            tensor_destroy: symbol(lib, "miopenDestroyTensorDescriptor")?,
            conv_create: symbol(lib, "miopenCreateConvolutionDescriptor")?,
            conv_init: symbol(lib, "miopenInitConvolutionDescriptor")?,
            conv_groups: symbol(lib, "miopenSetConvolutionGroupCount")?,
            conv_destroy: symbol(lib, "miopenDestroyConvolutionDescriptor")?,
            output_dim: symbol(lib, "miopenGetConvolutionForwardOutputDim")?,
            workspace_size: symbol(lib, "miopenConvolutionForwardGetWorkSpaceSize")?,
            find: symbol(lib, "miopenFindConvolutionForwardAlgorithm")?,
            forward: symbol(lib, "miopenConvolutionForward")?,
            forward_bias: symbol(lib, "miopenConvolutionForwardBias")?,
        })
    }
}

/// The opened library and its handle (on the default stream), destroyed last.
struct Library {
    f: Functions,
    handle: Handle,
    // declared last: the function pointers above point into it
    _library: libloading::Library,
}

/// `Ok` for `miopenStatusSuccess`, else MIOpen's message for `status`, naming `call`.
fn check(f: &Functions, status: Status, call: &str) -> Result<(), String> {
    if status == 0 {
        return Ok(());
    }
    // SAFETY: MIOpen returns a static NUL-terminated string for any status.
    let text = unsafe { (f.error_string)(status) };
    let text = match text.is_null() {
        true => "an error MIOpen does not name".into(),
        // SAFETY: as above.
        false => unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned(),
    };
    Err(format!("{call}: {text} (MIOpen status {status})"))
}

impl Library {
    fn check(&self, status: Status, call: &str) -> Result<(), String> {
        check(&self.f, status, call)
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle `Miopen::open` created, destroyed once, after every descriptor.
        unsafe { (self.f.destroy)(self.handle.0) };
    }
}

/// MIOpen, opened, with a handle made.
pub(crate) struct Miopen {
    library: Arc<Library>,
    /// The library's path as it was opened.
    pub path: String,
}

impl Miopen {
    /// MIOpen (or `$MXC_MIOPEN`), with a handle made; an error naming every place looked, or
    /// what failed.
    pub fn open() -> Result<Miopen, String> {
        let (library, path) = library::open(
            "MIOpen",
            "MXC_MIOPEN",
            &library::rocm_folders(),
            &["libMIOpen.so", "libMIOpen.so.1"],
        )?;
        let failed = |e: String| format!("MIOpen {path}: {e}");
        let f = functions(&library).map_err(failed)?;
        let mut handle = std::ptr::null_mut();
        // SAFETY: a valid output.
        check(&f, unsafe { (f.create)(&mut handle) }, "miopenCreate").map_err(failed)?;
        let library = Library {
            f,
            handle: Handle(handle),
            _library: library,
        };
        Ok(Miopen {
            library: Arc::new(library),
            path,
        })
    }

    /// The descriptors of `call` on the step's buffers, `args` (their device addresses:
    /// operands, then the result), with the workspace its algorithms may need; an error where
    /// MIOpen refuses it or computes another output shape.
    pub fn describe(&self, call: &ConvCall, args: &[DevicePtr]) -> Result<Descriptors, String> {
        let operand = |i: usize| args[..args.len() - 1][i];
        let mut d = Descriptors {
            library: self.library.clone(),
            tensors: Vec::new(),
            conv: Handle(std::ptr::null_mut()),
            bias: call.bias.map(operand),
            pointers: [operand(call.input), operand(call.weights), args[args.len() - 1]],
            needs: 0,
        };
        // on an error, dropping `d` destroys what was made so far
        d.make(call)?;
        Ok(d)
    }
}

/// A step's descriptors before its algorithm is found.
pub(crate) struct Descriptors {
    library: Arc<Library>,
    /// x, w, y, then the bias's (1 x out_channels x 1 x 1) when there is one.
    tensors: Vec<Handle>,
    conv: Handle,
    bias: Option<DevicePtr>,
    /// x, w, y.
    pointers: [DevicePtr; 3],
    /// The workspace bytes the step's algorithms may use.
    pub needs: usize,
}

/// `x` as a C int, or an error naming `what`.
fn int(x: u64, what: &str) -> Result<c_int, String> {
    c_int::try_from(x).map_err(|_| format!("{what} {x} is too large for MIOpen"))
}

impl Descriptors {
    fn make(&mut self, call: &ConvCall) -> Result<(), String> {
        let lib = self.library.clone();
        let f = &lib.f;
        let shapes = [
            [call.batch, call.channels, call.height, call.width],
            [
                call.out_channels,
                call.channels / call.group,
                call.kernel[0],
                call.kernel[1],
            ],
            [call.batch, call.out_channels, call.out[0], call.out[1]],
            [1, call.out_channels, 1, 1],
        ];
        let count = if call.bias.is_some() { 4 } else { 3 };
        for shape in &shapes[..count] {
            let dims: Vec<c_int> = shape.iter().map(|&d| int(d, "a dimension")).collect::<Result<_, _>>()?;
            let mut t = std::ptr::null_mut();
            // SAFETY: a valid output.
            lib.check(unsafe { (f.tensor_create)(&mut t) }, "miopenCreateTensorDescriptor")?;
            self.tensors.push(Handle(t));
            // SAFETY: the descriptor made above.
            let status = unsafe { (f.tensor_set_4d)(t, FLOAT, dims[0], dims[1], dims[2], dims[3]) };
            lib.check(status, "miopenSet4dTensorDescriptor")?;
        }
        let mut conv = std::ptr::null_mut();
        // SAFETY: a valid output.
        lib.check(
            unsafe { (f.conv_create)(&mut conv) },
            "miopenCreateConvolutionDescriptor",
        )?;
        self.conv = Handle(conv);
        let [ph, pw] = call.pads.map(|p| int(p, "a pad"));
        let [sh, sw] = call.strides.map(|s| int(s, "a stride"));
        let [dh, dw] = call.dilations.map(|d| int(d, "a dilation"));
        // SAFETY: the descriptor made above.
        let status = unsafe { (f.conv_init)(conv, CONVOLUTION, ph?, pw?, sh?, sw?, dh?, dw?) };
        lib.check(status, "miopenInitConvolutionDescriptor")?;
        // SAFETY: as above.
        let status = unsafe { (f.conv_groups)(conv, int(call.group, "a group count")?) };
        lib.check(status, "miopenSetConvolutionGroupCount")?;
        let [x, w, y] = [self.tensors[0].0, self.tensors[1].0, self.tensors[2].0];
        let mut out: [c_int; 4] = [0; 4];
        let [on, oc, oh, ow] = &mut out;
        // SAFETY: the descriptors made above; valid outputs.
        let status = unsafe { (f.output_dim)(conv, x, w, on, oc, oh, ow) };
        lib.check(status, "miopenGetConvolutionForwardOutputDim")?;
        let want = shapes[2].map(|d| d as c_int);
        if out != want {
            return Err(format!("MIOpen computes an output of {out:?}, not {want:?}"));
        }
        // SAFETY: the descriptors made above; a valid output.
        let status = unsafe { (f.workspace_size)(lib.handle.0, w, x, conv, y, &mut self.needs) };
        lib.check(status, "miopenConvolutionForwardGetWorkSpaceSize")
    }

    /// Finds the forward algorithm on the step's buffers with `workspace` (at least `needs`
    /// bytes): its result is overwritten, which at load nothing reads.
    pub fn find(self, workspace: Workspace) -> Result<Conv, String> {
        let lib = &*self.library;
        let [x, w, y] = self.pointers.map(|p| p as usize as *mut c_void);
        let [xd, wd, yd] = [self.tensors[0].0, self.tensors[1].0, self.tensors[2].0];
        let mut perf = AlgoPerf::default();
        let mut returned: c_int = 0;
        // SAFETY: descriptors made for these buffers (whose sizes the plan checked against
        // the call) and a workspace of the bytes MIOpen asked for; room for one result.
        let status = unsafe {
            (lib.f.find)(
                lib.handle.0,
                xd,
                x,
                wd,
                w,
                self.conv.0,
                yd,
                y,
                1,
                &mut returned,
                &mut perf,
                workspace.at as usize as *mut c_void,
                workspace.bytes,
                false,
            )
        };
        lib.check(status, "miopenFindConvolutionForwardAlgorithm")?;
        if returned < 1 || perf.memory > workspace.bytes {
            return Err(format!(
                "MIOpen found no forward algorithm within a workspace of {} bytes",
                workspace.bytes
            ));
        }
        Ok(Conv {
            descriptors: self,
            algo: perf.fwd_algo,
            workspace: Workspace {
                at: workspace.at,
                bytes: perf.memory,
            },
        })
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        let f = &self.library.f;
        // SAFETY: descriptors `make` made, each destroyed once (a null one was never made).
        unsafe {
            for t in &self.tensors {
                (f.tensor_destroy)(t.0);
            }
            if !self.conv.0.is_null() {
                (f.conv_destroy)(self.conv.0);
            }
        }
    }
}

/// One step's convolution, ready to run on its buffers.
pub(crate) struct Conv {
    descriptors: Descriptors,
    /// The `miopenConvFwdAlgorithm_t` found.
    algo: c_int,
    /// The workspace, of the bytes the algorithm found uses.
    workspace: Workspace,
}

impl Conv {
    /// Runs the convolution, then adds the bias, on the default stream.
    pub fn run(&self) -> Result<(), String> {
        let d = &self.descriptors;
        let lib = &*d.library;
        let (alpha, beta) = (1f32, 0f32);
        let (alpha, beta) = ((&alpha as *const f32).cast(), (&beta as *const f32).cast());
        let [x, w, y] = d.pointers.map(|p| p as usize as *mut c_void);
        let [xd, wd, yd] = [d.tensors[0].0, d.tensors[1].0, d.tensors[2].0];
        // SAFETY: descriptors, algorithm and workspace found for these buffers.
        let status = unsafe {
            (lib.f.forward)(
                lib.handle.0,
                alpha,
                xd,
                x,
                wd,
                w,
                d.conv.0,
                self.algo,
                beta,
                yd,
                y,
                self.workspace.at as usize as *mut c_void,
                self.workspace.bytes,
            )
        };
        lib.check(status, "miopenConvolutionForward")?;
        if let Some(b) = d.bias {
            // SAFETY: the bias's descriptor (made when the call has a bias) and buffer.
            let status = unsafe {
                (lib.f.forward_bias)(
                    lib.handle.0,
                    alpha,
                    d.tensors[3].0,
                    b as usize as *const c_void,
                    beta,
                    yd,
                    y,
                )
            };
            lib.check(status, "miopenConvolutionForwardBias")?;
        }
        Ok(())
    }
}
