//! The C API of mxc (`include/mxc.h`): a model parsed (with `--shape` strings), compiled by
//! `mxc-driver` exactly as `mxc compile` does, saved and loaded as `.mxr` files, and run on
//! buffers the caller owns. Errors are kept per thread for `mxc_last_error`; nothing unwinds
//! across the boundary (a panic is caught and reported as an error).

use mxc_dialects::dim::InputDims;
use mxc_dialects::{DType, Tensor, TensorType};
use mxc_driver::shapes::{parse_shapes, Shapes, Structures};
use mxc_driver::{Request, Runner, Silent};
use mxc_kernels::mxr::Contents;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::Arc;

const MXC_OK: c_int = 0;
const MXC_ERROR: c_int = 1;
const MAX_RANK: usize = 16;

/// `mxc_tensor` of the header.
#[repr(C)]
pub struct MxcTensor {
    name: *const c_char,
    dtype: c_int,
    rank: usize,
    dims: [usize; MAX_RANK],
    data: *mut c_void,
    bytes: usize,
}

/// `mxc_program` of the header: a model to compile, or compiled programs.
pub struct MxcProgram {
    state: State,
    /// The names handed out, kept while the program lives.
    inputs: Vec<CString>,
    outputs: Vec<CString>,
}

enum State {
    Parsed {
        model: PathBuf,
        shapes: Shapes,
        structures: Structures,
    },
    Compiled(Runner),
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Runs `body`, turning an error (or a panic) into `MXC_ERROR` and the thread's last error.
fn guarded(body: impl FnOnce() -> Result<(), String>) -> c_int {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
        .unwrap_or_else(|_| Err("mxc panicked (a bug: please report it)".into()));
    let (code, message) = match outcome {
        Ok(()) => (MXC_OK, String::new()),
        Err(m) => (MXC_ERROR, m),
    };
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = message);
    code
}

/// A C string argument as UTF-8.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn text<'a>(s: *const c_char, what: &str) -> Result<&'a str, String> {
    if s.is_null() {
        return Err(format!("{what} is NULL"));
    }
    // SAFETY: the caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| format!("{what} is not UTF-8"))
}

fn c_names(names: impl Iterator<Item = String>) -> Vec<CString> {
    names.map(|n| CString::new(n).unwrap_or_default()).collect()
}

impl MxcProgram {
    fn compiled(contents: Contents) -> MxcProgram {
        let runner = Runner::new(contents);
        let program = &runner.first().program;
        MxcProgram {
            inputs: c_names(program.inputs.iter().map(|b| b.name.clone())),
            outputs: c_names(program.outputs.iter().map(|b| b.name.clone())),
            state: State::Compiled(runner),
        }
    }
}

/// The message of the last error on this thread.
#[no_mangle]
pub extern "C" fn mxc_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `path` is a C string, `shapes` points at `n_shapes` C strings (or is NULL with 0), and
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn mxc_parse_onnx(
    path: *const c_char,
    shapes: *const *const c_char,
    n_shapes: usize,
    out: *mut *mut MxcProgram,
) -> c_int {
    guarded(|| {
        // SAFETY: as the function's contract says.
        let model = PathBuf::from(unsafe { text(path, "the model's path") }?);
        let mut args = Vec::with_capacity(n_shapes);
        for i in 0..n_shapes {
            // SAFETY: `shapes` holds `n_shapes` C strings.
            args.push(unsafe { text(*shapes.add(i), "a shape") }?.to_string());
        }
        let (shapes, structures) = parse_shapes(&args).map_err(|e| e.to_string())?;
        let dims: InputDims = mxc_onnx::model_input_dims(&model, &shapes).map_err(|e| e.to_string())?;
        let program = MxcProgram {
            inputs: c_names(dims.inputs().iter().map(|(n, _)| n.clone())),
            outputs: Vec::new(),
            state: State::Parsed {
                model,
                shapes,
                structures,
            },
        };
        write_out(out, program)
    })
}

fn write_out(out: *mut *mut MxcProgram, program: MxcProgram) -> Result<(), String> {
    if out.is_null() {
        return Err("the pointer to write the program to is NULL".into());
    }
    // SAFETY: `out` is writable, as the caller's contract says.
    unsafe { *out = Box::into_raw(Box::new(program)) };
    Ok(())
}

/// # Safety
/// `program` was made by this library and not freed; `target` is a C string.
#[no_mangle]
pub unsafe extern "C" fn mxc_compile(program: *mut MxcProgram, target: *const c_char) -> c_int {
    guarded(|| {
        // SAFETY: as the function's contract says.
        let (p, target) = unsafe {
            (
                program.as_mut().ok_or("the program is NULL")?,
                text(target, "the target")?,
            )
        };
        let target: mxc_codegen::Target = target.parse()?;
        let State::Parsed {
            model,
            shapes,
            structures,
        } = &p.state
        else {
            return Err("the program is compiled already".into());
        };
        let contents = mxc_driver::compile::compile(Request {
            model,
            label: model.display().to_string(),
            target,
            shapes: shapes.clone(),
            structures: structures.clone(),
            options: mxc_driver::default_options(),
            observer: &Silent,
        })
        .map_err(|e| e.to_string())?;
        *p = MxcProgram::compiled(contents);
        Ok(())
    })
}

/// # Safety
/// `program` was made by this library and not freed; `path` is a C string.
#[no_mangle]
pub unsafe extern "C" fn mxc_save(program: *const MxcProgram, path: *const c_char) -> c_int {
    guarded(|| {
        // SAFETY: as the function's contract says.
        let (p, path) = unsafe { (program.as_ref().ok_or("the program is NULL")?, text(path, "the path")?) };
        let State::Compiled(runner) = &p.state else {
            return Err("compile the program before saving it: an .mxr holds compiled code".into());
        };
        mxc_driver::write_mxr(path.as_ref(), runner.contents(), None).map_err(|e| e.to_string())
    })
}

/// # Safety
/// `path` is a C string and `out` writable.
#[no_mangle]
pub unsafe extern "C" fn mxc_load(path: *const c_char, out: *mut *mut MxcProgram) -> c_int {
    guarded(|| {
        // SAFETY: as the function's contract says.
        let path = unsafe { text(path, "the path") }?;
        let policy = mxc_driver::trust_policy(&[]).map_err(|e| e.to_string())?;
        let contents = mxc_driver::read_mxr(path.as_ref(), None, &policy).map_err(|e| e.to_string())?;
        write_out(out, MxcProgram::compiled(contents))
    })
}

/// # Safety
/// `program` was made by this library and not freed.
#[no_mangle]
pub unsafe extern "C" fn mxc_set_threads(program: *mut MxcProgram, threads: usize) -> c_int {
    guarded(|| {
        // SAFETY: as the function's contract says.
        let p = unsafe { program.as_mut() }.ok_or("the program is NULL")?;
        if threads == 0 {
            return Err("at least one thread runs the kernels".into());
        }
        let State::Compiled(runner) = &p.state else {
            return Err("compile the program before setting its threads".into());
        };
        p.state = State::Compiled(Runner::with_threads(runner.contents().clone(), threads));
        Ok(())
    })
}

fn name_at(names: Option<&[CString]>, index: usize) -> *const c_char {
    names
        .and_then(|n| n.get(index))
        .map_or(std::ptr::null(), |n| n.as_ptr())
}

/// # Safety
/// `program` is NULL or was made by this library and not freed.
#[no_mangle]
pub unsafe extern "C" fn mxc_input_count(program: *const MxcProgram) -> usize {
    // SAFETY: as the function's contract says.
    unsafe { program.as_ref() }.map_or(0, |p| p.inputs.len())
}

/// # Safety
/// `program` is NULL or was made by this library and not freed.
#[no_mangle]
pub unsafe extern "C" fn mxc_input_name(program: *const MxcProgram, index: usize) -> *const c_char {
    // SAFETY: as the function's contract says.
    name_at(unsafe { program.as_ref() }.map(|p| p.inputs.as_slice()), index)
}

/// # Safety
/// `program` is NULL or was made by this library and not freed.
#[no_mangle]
pub unsafe extern "C" fn mxc_output_count(program: *const MxcProgram) -> usize {
    // SAFETY: as the function's contract says.
    unsafe { program.as_ref() }.map_or(0, |p| p.outputs.len())
}

/// # Safety
/// `program` is NULL or was made by this library and not freed.
#[no_mangle]
pub unsafe extern "C" fn mxc_output_name(program: *const MxcProgram, index: usize) -> *const c_char {
    // SAFETY: as the function's contract says.
    name_at(unsafe { program.as_ref() }.map(|p| p.outputs.as_slice()), index)
}

/// Bytes the caller owns, seen for the length of one call.
struct CallerBytes {
    data: *const u8,
    len: usize,
}

// SAFETY: the bytes are only read, and only during the call that made them (mxc_run).
unsafe impl Send for CallerBytes {}
// SAFETY: as above.
unsafe impl Sync for CallerBytes {}

impl AsRef<[u8]> for CallerBytes {
    fn as_ref(&self) -> &[u8] {
        match self.len {
            0 => &[],
            // SAFETY: mxc_run's caller passes `len` readable bytes at `data`.
            _ => unsafe { std::slice::from_raw_parts(self.data, self.len) },
        }
    }
}

/// The input `t` as a tensor viewing the caller's bytes.
///
/// # Safety
/// `t`'s name is a C string and its data holds `bytes` readable bytes.
unsafe fn input_tensor(t: &MxcTensor) -> Result<(String, Tensor), String> {
    // SAFETY: as the function's contract says.
    let name = unsafe { text(t.name, "an input's name") }?.to_string();
    let dtype = usize::try_from(t.dtype)
        .ok()
        .and_then(|i| DType::ALL.get(i).copied())
        .ok_or_else(|| format!("input `{name}`: element type {} is not an mxc_dtype", t.dtype))?;
    if t.rank > MAX_RANK {
        return Err(format!("input `{name}`: rank {} is more than {MAX_RANK}", t.rank));
    }
    let ty = TensorType::new(dtype, t.dims[..t.rank].to_vec());
    let needed = ty
        .checked_num_bytes()
        .ok_or_else(|| format!("input `{name}`: {ty} is too large"))?;
    if needed != t.bytes || (needed > 0 && t.data.is_null()) {
        return Err(format!(
            "input `{name}`: {ty} takes {needed} bytes, the buffer given holds {}",
            t.bytes
        ));
    }
    let bytes = CallerBytes {
        data: t.data as *const u8,
        len: t.bytes,
    };
    let tensor = Tensor::view(ty, Arc::new(bytes), 0).ok_or_else(|| format!("input `{name}`: the buffer"))?;
    Ok((name, tensor))
}

/// # Safety
/// `program` was made by this library and not freed; `inputs` points at `n_inputs` tensors
/// and `outputs` at `n_outputs`, as the header describes.
#[no_mangle]
pub unsafe extern "C" fn mxc_run(
    program: *mut MxcProgram,
    inputs: *const MxcTensor,
    n_inputs: usize,
    outputs: *mut MxcTensor,
    n_outputs: usize,
) -> c_int {
    guarded(|| {
        // SAFETY: as the function's contract says.
        let p = unsafe { program.as_ref() }.ok_or("the program is NULL")?;
        let State::Compiled(runner) = &p.state else {
            return Err("compile the program before running it".into());
        };
        if n_outputs != p.outputs.len() || (n_outputs > 0 && outputs.is_null()) || (n_inputs > 0 && inputs.is_null()) {
            return Err(format!(
                "the program has {} outputs; {n_outputs} output tensors were given",
                p.outputs.len()
            ));
        }
        let mut given = HashMap::with_capacity(n_inputs);
        for i in 0..n_inputs {
            // SAFETY: `inputs` holds `n_inputs` tensors whose fields follow the header.
            let (name, tensor) = unsafe { input_tensor(&*inputs.add(i)) }?;
            if given.insert(name.clone(), tensor).is_some() {
                return Err(format!("input `{name}` is given twice"));
            }
        }
        let results = runner.run(&given).map_err(|e| e.to_string())?;
        for (i, (_, value)) in results.iter().enumerate() {
            // SAFETY: `outputs` holds `n_outputs` tensors, one per output.
            let out = unsafe { &mut *outputs.add(i) };
            write_output(out, &p.outputs[i], value)?;
        }
        Ok(())
    })
}

/// Copies `value` into the caller's output `out`, with its name, type and dimensions.
fn write_output(out: &mut MxcTensor, name: &CString, value: &Tensor) -> Result<(), String> {
    let shown = name.to_string_lossy();
    let bytes = value.bytes();
    out.name = name.as_ptr();
    out.dtype = DType::ALL
        .iter()
        .position(|&d| d == value.dtype())
        .map_or(-1, |i| i as c_int);
    if out.dtype < 0 || value.shape().len() > MAX_RANK {
        return Err(format!(
            "output `{shown}`: {} cannot be passed through the C API",
            value.ty
        ));
    }
    out.rank = value.shape().len();
    out.dims[..out.rank].copy_from_slice(value.shape());
    let capacity = out.bytes;
    out.bytes = bytes.len();
    if capacity < bytes.len() || (!bytes.is_empty() && out.data.is_null()) {
        return Err(format!(
            "output `{shown}`: {} takes {} bytes, the buffer given holds {capacity}",
            value.ty,
            bytes.len()
        ));
    }
    // SAFETY: the caller's buffer holds `capacity` >= bytes.len() writable bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.data as *mut u8, bytes.len()) };
    Ok(())
}

/// # Safety
/// `program` is NULL or was made by this library and not freed before.
#[no_mangle]
pub unsafe extern "C" fn mxc_free(program: *mut MxcProgram) {
    if !program.is_null() {
        // SAFETY: made by Box::into_raw in this library, freed once.
        drop(unsafe { Box::from_raw(program) });
    }
}
