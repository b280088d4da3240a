//! Heatmaps of language × language matrices, as the NusaX paper draws its cross-lingual result
//! (Fig. 2: a model trained on the row's language, tested on the column's): one panel per
//! matrix, side by side, each cell coloured on one scale shared by every panel (light to dark
//! blue as the value rises) and its value printed in it. PNG or SVG, text in a system TrueType
//! font as the other reports draw it.
use crate::sentiment::baselines::{language_code, CrossLingual};
use crate::sentiment::{SentimentResults, Setting};
use indolm_torch::error::{Error, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// One matrix to draw: a caption, row and column labels, and each cell's value (`None`: not
/// measured, drawn grey).
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    /// Printed above the panel.
    pub title: String,
    /// The rows' labels (the languages trained on).
    pub rows: Vec<String>,
    /// The columns' labels (the languages tested on).
    pub columns: Vec<String>,
    /// `values[row][column]`.
    pub values: Vec<Vec<Option<f64>>>,
}

impl Heatmap {
    /// The cross-lingual matrix of a `finetune sentiment` run (`results.json` with `setting =
    /// "cross-lingual"`): test macro-F1 ×100, each run's training language a row.
    pub fn from_sentiment_results(results: &SentimentResults, title: &str) -> Result<Heatmap> {
        if results.setting != Setting::CrossLingual {
            return Err(Error::data(
                "heatmap",
                format!("the results are of the {:?} setting; the matrix needs cross-lingual ones", results.setting),
            ));
        }
        Ok(Heatmap {
            title: title.to_string(),
            rows: results.runs.iter().map(|r| language_code(&r.trained_on).to_string()).collect(),
            columns: results.languages.iter().map(|l| language_code(l).to_string()).collect(),
            values: results
                .runs
                .iter()
                .map(|r| results.languages.iter().map(|l| r.test.get(l).map(|s| 100.0 * s.macro_f1)).collect())
                .collect(),
        })
    }

    /// A classical baseline's cross-lingual matrix (`indolm baseline nusax --cross-lingual`):
    /// test macro-F1 ×100.
    pub fn from_cross_lingual(matrix: &CrossLingual) -> Heatmap {
        Heatmap {
            title: matrix.model.title().to_string(),
            rows: matrix.train.iter().map(|l| language_code(l).to_string()).collect(),
            columns: matrix.test.iter().map(|l| language_code(l).to_string()).collect(),
            values: matrix.macro_f1.iter().map(|row| row.iter().map(|v| Some(100.0 * v)).collect()).collect(),
        }
    }
}

/// A cell's width and height in pixels.
const CELL: (u32, u32) = (46, 30);
/// Room left of a panel's cells (row labels) and above them (caption and column labels).
const MARGIN: (u32, u32) = (58, 56);
/// Room between panels and around the figure, and the figure title's height.
const GAP: u32 = 20;
/// The figure title's height.
const TITLE: u32 = 40;

/// The width a title's character takes, about, at the title's size.
const TITLE_CHAR: u32 = 11;

/// The pixel size of the figure of `panels` under `title`: panels side by side, as tall as the
/// tallest, and wide enough for the title.
pub fn figure_size(panels: &[Heatmap], title: &str) -> (u32, u32) {
    let width: u32 = panels.iter().map(|p| MARGIN.0 + CELL.0 * p.columns.len() as u32 + GAP).sum::<u32>() + GAP;
    let title_width = TITLE_CHAR * title.chars().count() as u32 + 2 * GAP;
    let rows = panels.iter().map(|p| p.rows.len() as u32).max().unwrap_or(0);
    (width.max(title_width), TITLE + MARGIN.1 + CELL.1 * rows + GAP)
}

/// The colour of `t` in [0, 1] on ColorBrewer's YlGnBu scale.
fn colour(t: f64) -> RGBColor {
    const STOPS: [(u8, u8, u8); 7] = [
        (255, 255, 217),
        (199, 233, 180),
        (127, 205, 187),
        (65, 182, 196),
        (29, 145, 192),
        (34, 94, 168),
        (12, 44, 132),
    ];
    let x = t.clamp(0.0, 1.0) * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + f * (f64::from(b) - f64::from(a))).round() as u8;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Draws the panels on `root`, values scaled between the smallest and largest of them.
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    panels: &[Heatmap],
    title: &str,
) -> std::result::Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(e)?;
    let finite: Vec<f64> =
        panels.iter().flat_map(|p| p.values.iter().flatten().flatten()).copied().filter(|v| v.is_finite()).collect();
    let low = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let high = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if high > low { high - low } else { 1.0 };
    let (cw, ch) = (CELL.0 as i32, CELL.1 as i32);
    let mut left = GAP as i32;
    for panel in panels {
        let x0 = left + MARGIN.0 as i32;
        let y0 = MARGIN.1 as i32;
        let width = cw * panel.columns.len() as i32;
        let caption = TextStyle::from(("sans-serif", 16).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
        root.draw(&Text::new(panel.title.clone(), (x0 + width / 2, y0 - 22), caption)).map_err(e)?;
        let column_label = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
        for (c, label) in panel.columns.iter().enumerate() {
            root.draw(&Text::new(label.clone(), (x0 + cw * c as i32 + cw / 2, y0 - 4), column_label.clone()))
                .map_err(e)?;
        }
        let row_label = TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
        for (r, label) in panel.rows.iter().enumerate() {
            let y = y0 + ch * r as i32;
            root.draw(&Text::new(label.clone(), (x0 - 6, y + ch / 2), row_label.clone())).map_err(e)?;
            for c in 0..panel.columns.len() {
                let x = x0 + cw * c as i32;
                let value = panel.values.get(r).and_then(|row| row.get(c)).copied().flatten();
                let (fill, text) = match value {
                    Some(v) if v.is_finite() => {
                        let t = (v - low) / span;
                        (colour(t), Some((format!("{v:.1}"), if t > 0.55 { WHITE } else { BLACK })))
                    }
                    _ => (RGBColor(220, 220, 220), None),
                };
                root.draw(&Rectangle::new([(x, y), (x + cw, y + ch)], fill.filled())).map_err(e)?;
                root.draw(&Rectangle::new([(x, y), (x + cw, y + ch)], WHITE.stroke_width(1))).map_err(e)?;
                if let Some((label, ink)) = text {
                    let style = TextStyle::from(("sans-serif", 11).into_font())
                        .color(&ink)
                        .pos(Pos::new(HPos::Center, VPos::Center));
                    root.draw(&Text::new(label, (x + cw / 2, y + ch / 2), style)).map_err(e)?;
                }
            }
        }
        left += MARGIN.0 as i32 + width + GAP as i32;
    }
    root.present().map_err(e)
}

/// Draws `panels` side by side under `title` to `out` (`.png` or `.svg`), through a temporary
/// name renamed into place; `flag` names the option that gave `out`, for the error about its
/// extension.
pub fn write_heatmaps(panels: &[Heatmap], title: &str, out: &Path, flag: &str) -> Result<()> {
    if panels.is_empty() || panels.iter().any(|p| p.rows.is_empty() || p.columns.is_empty()) {
        return Err(Error::data("heatmap", "nothing to draw: a matrix without rows or columns"));
    }
    let size = figure_size(panels, title);
    let ext = out.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
    let staging = indolm_core::files::Staging::keeping_extension(out);
    let tmp = staging.path().to_path_buf();
    let result = match ext.as_str() {
        "png" => {
            super::chart::register_system_font()?;
            draw(BitMapBackend::new(&tmp, size).into_drawing_area(), panels, title)
        }
        "svg" => {
            super::chart::register_system_font()?;
            draw(SVGBackend::new(&tmp, size).into_drawing_area(), panels, title)
        }
        other => {
            return Err(Error::argument(flag, format!("expected a .png or .svg file name, found extension {other:?}")))
        }
    };
    if let Err(message) = result {
        return Err(Error::invalid(out, format!("drawing failed: {message}")));
    }
    staging.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_runs_light_to_dark() {
        assert_eq!(colour(0.0), RGBColor(255, 255, 217));
        assert_eq!(colour(1.0), RGBColor(12, 44, 132));
        assert_eq!(colour(2.0), RGBColor(12, 44, 132));
        let mid = colour(0.5);
        assert_eq!(mid, RGBColor(65, 182, 196));
    }

    #[test]
    fn the_figure_grows_with_panels_and_rows() {
        let panel = |n: usize| Heatmap {
            title: "x".into(),
            rows: vec!["a".into(); n],
            columns: vec!["a".into(); n],
            values: vec![vec![Some(1.0); n]; n],
        };
        let (w1, h1) = figure_size(&[panel(12)], "t");
        let (w3, h3) = figure_size(&[panel(12), panel(12), panel(12)], "t");
        assert_eq!(w1, MARGIN.0 + 12 * CELL.0 + 2 * GAP);
        assert_eq!(w3, 3 * (MARGIN.0 + 12 * CELL.0 + GAP) + GAP);
        assert_eq!(h1, h3);
        assert_eq!(h1, TITLE + MARGIN.1 + 12 * CELL.1 + GAP);
        // A long title widens a small figure.
        let title = "x".repeat(100);
        assert_eq!(figure_size(&[panel(2)], &title).0, 100 * TITLE_CHAR + 2 * GAP);
    }
}
