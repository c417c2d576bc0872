//! Where in a prompt file an error is: TOML errors by their span, template errors
//! by the template's first line in the file plus minijinja's line in it.

/// Why a prompt file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PromptError {
    /// What is wrong.
    pub message: String,
    /// 1-based line in the file, where known.
    pub line: Option<usize>,
    /// 1-based column in the file, where known.
    pub column: Option<usize>,
}

pub fn toml_error(source: &str, error: &toml::de::Error) -> PromptError {
    let (line, column) = match error.span() {
        Some(span) => line_column(source, span.start),
        None => (None, None),
    };
    PromptError {
        message: error.message().to_owned(),
        line,
        column,
    }
}

/// A template error, placed in the file: minijinja counts lines within the template,
/// so the template's first line in the file is added.
pub fn template_error(source: &str, role: &str, error: &minijinja::Error) -> PromptError {
    let offset = template_start_line(source, role);
    PromptError {
        message: format!("messages.{role}: {}", describe(error)),
        line: error.line().map(|l| l + offset.unwrap_or(1) - 1),
        column: None,
    }
}

pub fn describe(error: &minijinja::Error) -> String {
    match error.detail() {
        Some(detail) => format!("{}: {detail}", error.kind()),
        None => error.kind().to_string(),
    }
}

/// The 1-based file line where the `role = """` template text starts. Only lines
/// after the `[messages]` header count (when there is one), so a `user` key in
/// `[params]` is not taken for the template.
fn template_start_line(source: &str, role: &str) -> Option<usize> {
    let header = source
        .lines()
        .position(|line| line.trim() == "[messages]")
        .map_or(0, |index| index + 1);
    source
        .lines()
        .enumerate()
        .skip(header)
        .find_map(|(index, line)| {
            let trimmed = line.trim_start();
            let rest = trimmed
                .strip_prefix(role)?
                .trim_start()
                .strip_prefix('=')?
                .trim_start();
            // A `"""` string starts on the next line when the opening quotes end the line.
            Some(if rest == "\"\"\"" || rest == "'''" {
                index + 2
            } else {
                index + 1
            })
        })
}

fn line_column(source: &str, offset: usize) -> (Option<usize>, Option<usize>) {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (Some(line), Some(column))
}
