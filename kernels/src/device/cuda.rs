//! The CUDA driver API (`libcuda.so.1`): its names for the shared calls (`runtime.rs`), and
//! opening it: initialise, device 0's name and compute capability, its primary context (made
//! current on each thread before a call). Only C signatures are declared, no structure.

use super::runtime::{Current, ErrorText, Functions, Names, Runtime, Status};
use super::{c_text, symbol, Handle, Vendor};
use mxc_dialects::program::GpuArch;
use std::ffi::{c_char, c_int, c_uint, c_void};

const NAMES: Names = Names {
    alloc: "cuMemAlloc_v2",
    free: "cuMemFree_v2",
    to_device: "cuMemcpyHtoD_v2",
    to_host: "cuMemcpyDtoH_v2",
    on_device: "cuMemcpyDtoD_v2",
    load_module: "cuModuleLoadData",
    unload_module: "cuModuleUnload",
    function: "cuModuleGetFunction",
    launch: "cuLaunchKernel",
    synchronize: "cuCtxSynchronize",
};

/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` and `_MINOR`.
const COMPUTE_CAPABILITY_MAJOR: c_int = 75;
const COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// Initialises the driver and retains device 0's primary context; returns the runtime with
/// the device's name and architecture.
pub fn open(library: libloading::Library) -> Result<(Runtime, String, Option<GpuArch>), String> {
    let lib = &library;
    // SAFETY: each type is the CUDA driver API's signature of the function named.
    let (init, device_get, get_name, get_attribute, retain, set_current, errors) = unsafe {
        (
            symbol::<unsafe extern "C" fn(c_uint) -> Status>(lib, "cuInit")?,
            symbol::<unsafe extern "C" fn(*mut c_int, c_int) -> Status>(lib, "cuDeviceGet")?,
            symbol::<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status>(lib, "cuDeviceGetName")?,
            symbol::<unsafe extern "C" fn(*mut c_int, c_int, c_int) -> Status>(lib, "cuDeviceGetAttribute")?,
            symbol::<unsafe extern "C" fn(*mut *mut c_void, c_int) -> Status>(lib, "cuDevicePrimaryCtxRetain")?,
            symbol::<unsafe extern "C" fn(*mut c_void) -> Status>(lib, "cuCtxSetCurrent")?,
            ErrorText::Cuda(symbol(lib, "cuGetErrorString")?),
        )
    };
    let mut device = 0;
    let mut name = [0u8; 256];
    let (mut major, mut minor) = (0, 0);
    let mut context = std::ptr::null_mut();
    // SAFETY: the driver's documented calls, each output a valid pointer of its type.
    unsafe {
        errors.check(init(0), "cuInit")?;
        errors.check(device_get(&mut device, 0), "cuDeviceGet")?;
        errors.check(get_name(name.as_mut_ptr().cast(), 255, device), "cuDeviceGetName")?;
        errors.check(
            get_attribute(&mut major, COMPUTE_CAPABILITY_MAJOR, device),
            "cuDeviceGetAttribute",
        )?;
        errors.check(
            get_attribute(&mut minor, COMPUTE_CAPABILITY_MINOR, device),
            "cuDeviceGetAttribute",
        )?;
        errors.check(retain(&mut context, device), "cuDevicePrimaryCtxRetain")?;
    }
    let current = Current::Context(set_current, Handle(context));
    let f = Functions::look_up(&library, &NAMES)?;
    let runtime = Runtime::new(f, Some(library), Vendor::Nvidia, &NAMES, current, errors);
    Ok((runtime, c_text(&name), format!("sm_{major}{minor}").parse().ok()))
}
