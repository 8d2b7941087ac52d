//! A benchmark run of the binary, built up flag by flag and run to its end:
//! `Run::offline(&url, &dir).dataset().samples(300).tokenizer().streaming(true).run()`. The
//! flags go on the command line in the order they were given; what the run did comes back as
//! `Ran`: its exit status, stdout and stderr (an `Output`), and its report directory.

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `llm-loadgen benchmark …`, being built.
#[derive(Debug, Clone)]
pub struct Run {
    args: Vec<String>,
    dir: PathBuf,
}

/// A finished run: its output (also through `Deref`) and its report directory.
#[derive(Debug)]
pub struct Ran {
    pub output: Output,
    pub dir: PathBuf,
}

impl Run {
    /// `benchmark offline --endpoints URL --report-dir DIR`.
    pub fn offline(url: &str, dir: &Path) -> Run {
        Run::benchmark(&["offline"], url, dir)
    }

    /// `benchmark online --endpoints URL --report-dir DIR` (a load pattern still to be given).
    pub fn online(url: &str, dir: &Path) -> Run {
        Run::benchmark(&["online"], url, dir)
    }

    /// `benchmark MODE… --endpoints URL --report-dir DIR`, e.g. `["online", "--load-pattern",
    /// "poisson"]`.
    pub fn benchmark(mode: &[&str], url: &str, dir: &Path) -> Run {
        let mut args: Vec<String> = vec!["benchmark".into()];
        args.extend(mode.iter().map(|s| s.to_string()));
        let run = Run { args, dir: dir.to_path_buf() };
        run.arg("--endpoints").arg(url).arg("--report-dir").arg(dir.display().to_string())
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Run {
        self.args.push(arg.into());
        self
    }

    pub fn args<S: AsRef<str>>(mut self, args: impl IntoIterator<Item = S>) -> Run {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_string()));
        self
    }

    /// `--model NAME`.
    pub fn model(self, name: &str) -> Run {
        self.arg("--model").arg(name)
    }

    /// `--dataset` the project's 1,000-prompt dataset.
    pub fn dataset(self) -> Run {
        self.dataset_from(&super::dataset())
    }

    /// `--dataset SPEC`.
    pub fn dataset_from(self, spec: &str) -> Run {
        self.arg("--dataset").arg(spec)
    }

    /// `--num-samples N`.
    pub fn samples(self, n: u64) -> Run {
        self.arg("--num-samples").arg(n.to_string())
    }

    /// `--workers N`.
    pub fn workers(self, n: u32) -> Run {
        self.arg("--workers").arg(n.to_string())
    }

    /// `--max-connections N`.
    pub fn connections(self, n: u32) -> Run {
        self.arg("--max-connections").arg(n.to_string())
    }

    /// `--tokenizer` the one-token-per-character tokenizer.
    pub fn tokenizer(self) -> Run {
        self.tokenizer_from(&super::char_tokenizer())
    }

    /// `--tokenizer PATH`.
    pub fn tokenizer_from(self, path: &str) -> Run {
        self.arg("--tokenizer").arg(path)
    }

    /// `--streaming on` or `off`.
    pub fn streaming(self, on: bool) -> Run {
        self.arg("--streaming").arg(if on { "on" } else { "off" })
    }

    /// The command line after `llm-loadgen`.
    pub fn argv(&self) -> &[String] {
        &self.args
    }

    /// The binary with these arguments, for a test that sets more on it (its environment, its
    /// directory) or starts it itself.
    pub fn command(&self) -> Command {
        let mut cmd = super::bin();
        cmd.args(self.args.iter().map(OsStr::new));
        cmd
    }

    /// Runs it to its end; the output is echoed for failing tests.
    pub fn run(self) -> Ran {
        let output = self.command().output().expect("the binary runs");
        super::show(&output);
        Ran { output, dir: self.dir }
    }
}

impl Deref for Ran {
    type Target = Output;
    fn deref(&self) -> &Output {
        &self.output
    }
}
