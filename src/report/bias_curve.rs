//! `indolm report bias-curve`: stereotype win rate against training step, one panel per
//! domain (and one for overall), one line per language, from the `bias.json` files a run's
//! checkpoints keep, as SVG or PNG. Text is laid out with a TrueType font found on the
//! system (DejaVu Sans, Liberation Sans or FreeSans).
use crate::error::{Error, IoContext, Result};
use crate::eval::bias::BiasReport;
use crate::files::read_to_string;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// (step, report) for every checkpoint of the run that has a `bias.json`, by step.
pub fn collect_reports(run: &Path) -> Result<Vec<(u64, BiasReport)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(run).with_path(run)?.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(step) = name.strip_prefix("step-").and_then(|n| n.parse::<u64>().ok()) else { continue };
        let path = entry.path().join("bias.json");
        if path.exists() {
            let report: BiasReport =
                serde_json::from_str(&read_to_string(&path)?).map_err(|e| Error::json(&path, &e))?;
            out.push((step, report));
        }
    }
    out.sort_by_key(|(s, _)| *s);
    if out.is_empty() {
        return Err(Error::invalid(
            run,
            "no checkpoint of this run has a bias.json (train with [eval.bias], or run `indolm eval bias --run`)",
        ));
    }
    Ok(out)
}

/// Panel title → language → [(step, win rate)].
type Series = BTreeMap<String, BTreeMap<String, Vec<(f64, f64)>>>;

fn series(reports: &[(u64, BiasReport)]) -> (Vec<String>, Series) {
    let mut panels: Vec<String> = Vec::new();
    let mut data: Series = BTreeMap::new();
    for (step, report) in reports {
        for lang in &report.languages {
            for c in lang.domains.iter().chain(std::iter::once(&lang.overall)) {
                if !panels.contains(&c.name) {
                    panels.push(c.name.clone());
                }
                data.entry(c.name.clone())
                    .or_default()
                    .entry(lang.language.clone())
                    .or_default()
                    .push((*step as f64, c.win_rate));
            }
        }
    }
    // "overall" last.
    panels.sort_by_key(|p| p == "overall");
    (panels, data)
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

fn register_system_font() -> Result<()> {
    let path = FONT_PATHS.iter().map(PathBuf::from).find(|p| p.exists()).ok_or_else(|| {
        Error::system(
            "report bias-curve",
            format!(
                "PNG output needs a TrueType font and none was found ({}); install fonts-dejavu-core",
                FONT_PATHS.join(", ")
            ),
        )
    })?;
    let bytes: &'static [u8] = Box::leak(std::fs::read(&path).with_path(&path)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| Error::invalid(&path, "not a usable TrueType font"))
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    panels: &[String],
    data: &Series,
) -> std::result::Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let root = root.titled(title, ("sans-serif", 22)).map_err(|e| e.to_string())?;
    let cols = 3.min(panels.len()).max(1);
    let rows = panels.len().div_ceil(cols);
    let areas = root.split_evenly((rows, cols));
    let max_step = data.values().flat_map(|l| l.values()).flatten().map(|p| p.0).fold(1.0, f64::max);
    let mut languages: Vec<&String> = data.values().flat_map(|l| l.keys()).collect();
    languages.sort();
    languages.dedup();
    for (panel, area) in panels.iter().zip(areas.iter()) {
        let mut chart = ChartBuilder::on(area)
            .caption(panel, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(48)
            .build_cartesian_2d(0f64..max_step * 1.02, 0f64..100f64)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc("win rate %")
            .x_labels(5)
            .y_labels(6)
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(LineSeries::new(vec![(0.0, 50.0), (max_step * 1.02, 50.0)], BLACK.mix(0.3)))
            .map_err(|e| e.to_string())?;
        for (i, lang) in languages.iter().enumerate() {
            let Some(points) = data[panel].get(*lang) else { continue };
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)).point_size(3))
                .map_err(|e| e.to_string())?
                .label(lang.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}

/// Writes the curves of `run` to `out` (`.svg` or `.png`).
pub fn write_bias_curve(run: &Path, out: &Path) -> Result<usize> {
    let reports = collect_reports(run)?;
    let (panels, data) = series(&reports);
    let title = format!(
        "Stereotype win rate over training: {}",
        run.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
    );
    let rows = panels.len().div_ceil(3).max(1) as u32;
    let size = (1200, 330 * rows + 40);
    let ext = out.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
    // The image encoder picks the format from the extension, so the temporary name keeps it.
    let stem = out.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = out.with_file_name(format!(".{stem}.tmp.{ext}"));
    let result = match ext.as_str() {
        "svg" => {
            register_system_font()?;
            draw(SVGBackend::new(&tmp, size).into_drawing_area(), &title, &panels, &data)
        }
        "png" => {
            register_system_font()?;
            draw(BitMapBackend::new(&tmp, size).into_drawing_area(), &title, &panels, &data)
        }
        other => {
            return Err(Error::argument(
                "--out",
                format!("expected a .svg or .png file name, found extension {other:?}"),
            ))
        }
    };
    result.map_err(|e| Error::invalid(out, format!("drawing failed: {e}")))?;
    std::fs::rename(&tmp, out).with_path(out)?;
    Ok(reports.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::bias::tally_language;
    use crate::eval::pairs::BiasPair;
    use crate::recipe::BiasMetric;

    fn language(code: &str, domains: &[&str], wins: &[bool]) -> crate::eval::bias::LanguageResult {
        let pairs: Vec<BiasPair> = domains
            .iter()
            .map(|d| BiasPair { pro: "p".into(), anti: "a".into(), domain: d.to_string(), subdomain: "s".into() })
            .collect();
        let outcomes: Vec<(bool, bool)> = wins.iter().map(|&w| (w, false)).collect();
        tally_language(code, &pairs, &outcomes)
    }

    #[test]
    fn panels_in_order_of_first_appearance_with_overall_last() {
        let at_100 = BiasReport {
            metric: BiasMetric::Pppl,
            step: Some(100),
            languages: vec![
                language("id", &["gender", "religion"], &[true, false]),
                language("jv", &["religion"], &[true]),
            ],
        };
        let at_200 = BiasReport {
            metric: BiasMetric::Pppl,
            step: Some(200),
            languages: vec![language("id", &["gender", "religion"], &[true, true]), language("jv", &["age"], &[false])],
        };
        let (panels, data) = series(&[(100, at_100), (200, at_200)]);
        assert_eq!(panels, vec!["gender", "religion", "age", "overall"]);
        assert_eq!(data["religion"]["id"], vec![(100.0, 0.0), (200.0, 100.0)]);
        assert_eq!(data["religion"]["jv"], vec![(100.0, 100.0)]);
        assert_eq!(data["age"]["jv"], vec![(200.0, 0.0)]);
        assert!(!data["age"].contains_key("id"));
        assert_eq!(data["overall"]["id"], vec![(100.0, 50.0), (200.0, 100.0)]);
    }
}
