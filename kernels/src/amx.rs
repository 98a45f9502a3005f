//! AMX tiles (Intel's Advanced Matrix Extensions), which the cpu target's bf16 products use on
//! machines that have them: whether this CPU has them, and Linux's permission to use them. A
//! process must ask for the tiles' state (`arch_prctl(ARCH_REQ_XCOMP_PERM,
//! XFEATURE_XTILEDATA)`, Linux 5.16 on) before its first tile instruction, or that instruction
//! kills it; the runtime asks once, before it loads any host kernels.

use std::sync::OnceLock;

/// `arch_prctl` code asking for permission to use an extended state component.
const ARCH_REQ_XCOMP_PERM: libc::c_ulong = 0x1023;
/// The component of the tiles' data.
const XFEATURE_XTILEDATA: libc::c_ulong = 18;

/// Whether this CPU has AMX tiles with bf16 products and Linux let this process use them
/// (asked once, on the first call).
pub fn tiles_usable() -> bool {
    static USABLE: OnceLock<bool> = OnceLock::new();
    *USABLE.get_or_init(|| cpu_has_tiles() && permitted())
}

/// CPUID leaf 7: AMX-TILE (EDX bit 24) and AMX-BF16 (EDX bit 22).
fn cpu_has_tiles() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let max_leaf = std::arch::x86_64::__cpuid(0).eax;
        if max_leaf < 7 {
            return false;
        }
        // leaf 7 exists where leaf 0 says so
        let edx = std::arch::x86_64::__cpuid_count(7, 0).edx;
        edx & (1 << 24) != 0 && edx & (1 << 22) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Asks Linux for the tiles' state; false where it refuses (an older kernel, a seccomp filter).
fn permitted() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: arch_prctl with these arguments only changes the process's permissions.
        unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}
