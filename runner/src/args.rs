//! The runner's command line, read by hand (it is small, and the runner is meant to be small).

use std::path::PathBuf;

pub const USAGE: &str = "\
usage: mxc-runner FILE.mxr [options]

Runs a compiled program (mxc compile ... -o FILE.mxr) on this machine: a gpu file on its GPU
(HIP or the CUDA driver, found at run time), a ref or cpu file on its CPU.

options:
  --input NAME=FILE.npy   a value for input NAME (every input must be given)
  --inputs DIR            each input not given with --input from DIR's .npy of its name (mxc run --save-inputs)
  -o, --output-dir DIR    write each output to DIR as .npy
  --check DIR             compare each output with DIR's .npy of the same name; exit 1 if any differs
  --rtol X, --atol X      the tolerance of --check: |out - expected| <= atol + rtol*|expected| (1e-3, 1e-4)
  --repeat N              run N times and print the median time
  --threads N             CPU threads (a cpu or ref file; all cores' default is one)
  --trusted-key FILE      accept only files signed by this key (may repeat; MXC_TRUSTED_KEYS too)
  -h, --help              this text
";

pub struct Args {
    pub file: PathBuf,
    pub inputs: Vec<(String, PathBuf)>,
    pub inputs_dir: Option<PathBuf>,
    pub output_dir: Option<PathBuf>,
    pub check: Option<PathBuf>,
    pub rtol: f64,
    pub atol: f64,
    pub repeat: usize,
    pub threads: Option<usize>,
    pub trusted_keys: Vec<PathBuf>,
}

impl Args {
    /// The arguments after the program's name; `None` when help is asked for.
    pub fn parse(mut argv: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
        let mut file = None;
        let mut args = Args {
            file: PathBuf::new(),
            inputs: Vec::new(),
            inputs_dir: None,
            output_dir: None,
            check: None,
            rtol: 1e-3,
            atol: 1e-4,
            repeat: 1,
            threads: None,
            trusted_keys: Vec::new(),
        };
        while let Some(arg) = argv.next() {
            let mut value = || argv.next().ok_or_else(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "-h" | "--help" => return Ok(None),
                "--input" => {
                    let v = value()?;
                    let (name, path) = v
                        .split_once('=')
                        .ok_or_else(|| format!("--input {v}: expected NAME=FILE.npy"))?;
                    args.inputs.push((name.to_string(), path.into()));
                }
                "--inputs" => args.inputs_dir = Some(value()?.into()),
                "-o" | "--output-dir" => args.output_dir = Some(value()?.into()),
                "--check" => args.check = Some(value()?.into()),
                "--rtol" => args.rtol = number(&arg, &value()?)?,
                "--atol" => args.atol = number(&arg, &value()?)?,
                "--repeat" => args.repeat = count(&arg, &value()?)?,
                "--threads" => args.threads = Some(count(&arg, &value()?)?),
                "--trusted-key" => args.trusted_keys.push(value()?.into()),
                flag if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
                path if file.is_none() => file = Some(PathBuf::from(path)),
                extra => return Err(format!("one file is run, and {extra} is a second")),
            }
        }
        args.file = file.ok_or("no .mxr file given")?;
        if args.trusted_keys.is_empty() {
            if let Some(list) = std::env::var_os("MXC_TRUSTED_KEYS") {
                args.trusted_keys = std::env::split_paths(&list)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect();
            }
        }
        Ok(Some(args))
    }
}

fn number(flag: &str, v: &str) -> Result<f64, String> {
    v.parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("{flag} {v}: expected a number at least 0"))
}

fn count(flag: &str, v: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|&n: &usize| n >= 1)
        .ok_or_else(|| format!("{flag} {v}: expected a whole number at least 1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Args>, String> {
        Args::parse(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn options_are_read_and_bad_ones_named() {
        let a = parse(&["m.mxr", "--input", "x=x.npy", "--check", "ref", "--repeat", "5"])
            .unwrap()
            .unwrap();
        assert_eq!(a.file, PathBuf::from("m.mxr"));
        assert_eq!(a.inputs, [("x".to_string(), PathBuf::from("x.npy"))]);
        assert_eq!((a.check, a.repeat), (Some(PathBuf::from("ref")), 5));
        assert!(parse(&["--help"]).unwrap().is_none());
        assert_eq!(
            parse(&["m.mxr", "--input", "x"]).err().unwrap(),
            "--input x: expected NAME=FILE.npy"
        );
        assert_eq!(
            parse(&["m.mxr", "--repeat", "0"]).err().unwrap(),
            "--repeat 0: expected a whole number at least 1"
        );
        assert_eq!(parse(&["m.mxr", "--fast"]).err().unwrap(), "unknown option --fast");
        assert_eq!(
            parse(&["m.mxr", "n.mxr"]).err().unwrap(),
            "one file is run, and n.mxr is a second"
        );
        assert_eq!(parse(&["--repeat"]).err().unwrap(), "--repeat needs a value");
        assert_eq!(parse(&[]).err().unwrap(), "no .mxr file given");
    }
}
