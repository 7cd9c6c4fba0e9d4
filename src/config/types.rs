//! The enums of the `ui` settings. The typed configuration itself, one
//! struct per section, is made by the settings table (`keys.rs`).

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Color {
    Auto,
    Always,
    Never,
}

impl Color {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Color::Auto => "auto",
            Color::Always => "always",
            Color::Never => "never",
        }
    }
}

/// How a run shows its progress (`ui.progress`, `--progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Progress {
    // Plain comments, not doc comments: clap would turn those into a long
    // "Possible values" list in every command's help.
    // The live display on an interactive terminal, plain lines elsewhere.
    Auto,
    // Timestamped lines, even on a terminal.
    Plain,
    // The live display whenever stdout is a terminal, even on CI.
    Bar,
}

impl Progress {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Progress::Auto => "auto",
            Progress::Plain => "plain",
            Progress::Bar => "bar",
        }
    }
}
