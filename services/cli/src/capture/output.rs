//! What `pinfold capture` writes: JSON pretty-printed, a card to a file
//! whole or not at all, and the lines that show each conflict between
//! captures.

use std::io::Write;
use std::path::Path;

use pinfold_core::draft::Merged;
use serde_json::Value;

pub(super) fn write_pretty(out: &mut dyn Write, v: &Value) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, v)?;
    writeln!(out)
}

/// Writes `card` to `path` whole or not at all (a temporary file beside it,
/// renamed).
pub(super) fn write_file(path: &Path, card: &Value) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "card.json".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    write_pretty(&mut f, card)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

pub(super) fn conflict_lines(m: &Merged) -> Vec<String> {
    let mut lines = Vec::new();
    for c in &m.conflicts {
        lines.push(format!("capture: conflict: {}", c.message));
        for (i, v) in c.versions.iter().enumerate() {
            let at: Vec<String> = v
                .found_in
                .iter()
                .map(|l| format!("{} {}", l.capture, l.pointer))
                .collect();
            let shown = v
                .value
                .as_ref()
                .map_or("(absent)".to_owned(), Value::to_string);
            let differs = if v.differs_at.is_empty() {
                String::new()
            } else {
                format!(
                    " (differs at {})",
                    v.differs_at
                        .iter()
                        .map(|p| if p.is_empty() { "the root" } else { p.as_str() })
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            lines.push(format!(
                "  version {} in {}{differs}: {shown}",
                i + 1,
                at.join(", ")
            ));
        }
    }
    lines
}
