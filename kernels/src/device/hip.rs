//! The HIP runtime API (`libamdhip64`): its names for the shared calls (`runtime.rs`), and
//! opening it: initialise, count the devices, device 0's name and chip. Only C signatures are
//! declared; the one structure read, the device properties (whose layout changed across ROCm
//! releases), is filled into a large zeroed buffer and only searched for the chip's name
//! (`gfx90a:…`).

use super::runtime::{Current, ErrorText, Names, Runtime, Status};
use super::{c_text, symbol, Vendor};
use mxc_dialects::program::GpuArch;
use std::ffi::{c_char, c_int, c_uint, c_void};

const NAMES: Names = Names {
    alloc: "hipMalloc",
    free: "hipFree",
    to_device: "hipMemcpyHtoD",
    to_host: "hipMemcpyDtoH",
    on_device: "hipMemcpyDtoD",
    load_module: "hipModuleLoadData",
    unload_module: "hipModuleUnload",
    function: "hipModuleGetFunction",
    launch: "hipModuleLaunchKernel",
    synchronize: "hipDeviceSynchronize",
};

type Properties = unsafe extern "C" fn(*mut c_void, c_int) -> Status;

/// Bytes given to the device-properties call: several times any release's structure.
const PROPERTIES_BYTES: usize = 16 << 10;

/// Initialises HIP; returns the runtime (device 0 made current on each thread before a call)
/// with the device's name and chip.
pub fn open(library: libloading::Library) -> Result<(Runtime, String, Option<GpuArch>), String> {
    let lib = &library;
    // SAFETY: each type is the HIP API's signature of the function named.
    let (init, count, get_name, set_device, errors) = unsafe {
        (
            symbol::<unsafe extern "C" fn(c_uint) -> Status>(lib, "hipInit")?,
            symbol::<unsafe extern "C" fn(*mut c_int) -> Status>(lib, "hipGetDeviceCount")?,
            symbol::<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> Status>(lib, "hipDeviceGetName")?,
            symbol::<unsafe extern "C" fn(c_int) -> Status>(lib, "hipSetDevice")?,
            ErrorText::Hip(symbol(lib, "hipGetErrorString")?),
        )
    };
    // ROCm 6 renamed the call when the structure changed; older releases have the plain name
    // SAFETY: the signature of both names.
    let properties: Option<Properties> = unsafe {
        symbol(lib, "hipGetDevicePropertiesR0600")
            .or_else(|_| symbol(lib, "hipGetDeviceProperties"))
            .ok()
    };
    let mut devices = 0;
    let mut name = [0u8; 256];
    // SAFETY: HIP's documented calls, each output a valid pointer of its type.
    unsafe {
        errors.check(init(0), "hipInit")?;
        errors.check(count(&mut devices), "hipGetDeviceCount")?;
        if devices == 0 {
            return Err("HIP finds no GPU".into());
        }
        errors.check(set_device(0), "hipSetDevice")?;
        errors.check(get_name(name.as_mut_ptr().cast(), 255, 0), "hipDeviceGetName")?;
    }
    let arch = properties.and_then(|call| {
        let mut props = vec![0u8; PROPERTIES_BYTES];
        // SAFETY: the buffer is larger than any release's structure.
        let status = unsafe { call(props.as_mut_ptr().cast(), 0) };
        (status == 0).then(|| chip_in(&props)).flatten()
    });
    let runtime = Runtime::new(library, Vendor::Amd, &NAMES, Current::Device(set_device), errors)?;
    Ok((runtime, c_text(&name), arch))
}

/// The chip named in a device-properties structure: its `gcnArchName` (`gfx90a:sramecc+:xnack-`),
/// the first C string there starting `gfx` followed by a letter or digit.
fn chip_in(props: &[u8]) -> Option<GpuArch> {
    (0..props.len().saturating_sub(4)).find_map(|at| {
        let starts = props[at..].starts_with(b"gfx") && (at == 0 || props[at - 1] == 0);
        if !starts {
            return None;
        }
        let name = c_text(&props[at..]);
        name.split(':').next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chip_is_found_in_the_properties_whatever_their_layout() {
        let mut props = vec![0u8; 2048];
        props[..18].copy_from_slice(b"AMD Instinct MI210");
        props[1000..1022].copy_from_slice(b"gfx90a:sramecc+:xnack-");
        assert_eq!(chip_in(&props), Some(GpuArch::Amd("gfx90a".into())));
        // a `gfx` inside another string is not the chip's name
        let mut props = vec![0u8; 64];
        props[..10].copy_from_slice(b"Radeon gfx");
        assert_eq!(chip_in(&props), None);
    }
}
