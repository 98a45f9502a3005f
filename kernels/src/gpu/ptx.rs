//! Checks of PTX against the plan that launches it: made for the architecture asked for,
//! each kernel the plan launches an `.entry` taking the arguments the launch packs (one
//! 8-byte pointer per buffer, then `lo` and `hi`), and no `.extern` function, which would be
//! an undefined function the CUDA driver refuses at load (a math function without libdevice).

use super::KernelExpect;

pub fn check(bytes: &[u8], arch: &str, expected: &[KernelExpect]) -> Result<(), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "PTX that is not UTF-8 text")?;
    let target = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(".target "))
        .ok_or("no .target directive")?;
    if target.split(',').next().map(str::trim) != Some(arch) {
        return Err(format!("made for `{target}`, not {arch}"));
    }
    if let Some(line) = text.lines().find(|l| l.trim_start().starts_with(".extern")) {
        return Err(format!("an undefined function: `{}`", line.trim()));
    }
    for want in expected {
        let head = format!(".entry {}(", want.name);
        let at = text
            .find(&head)
            .ok_or_else(|| format!("kernel `{}` is missing", want.name))?;
        let params = &text[at + head.len()..];
        let params = &params[..params.find(')').ok_or("an .entry without its closing parenthesis")?];
        let count = params.matches(".param .u64").count() + params.matches(".param .b64").count();
        let total = params.matches(".param").count();
        if count != want.buffers + 2 || total != count {
            return Err(format!(
                "kernel `{}` takes {total} parameters ({count} of 8 bytes), the launch packs {} of 8 bytes",
                want.name,
                want.buffers + 2
            ));
        }
    }
    Ok(())
}
