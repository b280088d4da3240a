//! Line charts over training steps for the reports, as SVG or PNG: a grid of panels sharing one
//! legend at the top, integer step ticks, a line per series with its 95% interval as a shaded
//! band, and an optional reference line (50 = no preference). Text is laid out with a TrueType
//! font found on the system (DejaVu Sans, Liberation Sans or FreeSans).
use indolm_torch::error::{Error, IoContext, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// A point of a series: step, value, and optionally its interval (low, high).
pub(crate) type Point = (u64, f64, Option<(f64, f64)>);

/// One series: a label from the figure's legend and its points.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Which legend entry (and colour) it is.
    pub label: String,
    /// (step, value, optional (low, high)), by step.
    pub points: Vec<Point>,
}

/// One chart of the grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Its caption.
    pub title: String,
    /// Its series.
    pub lines: Vec<Line>,
}

/// A figure: a title, panels three to a row, and the legend shared by all panels.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Printed above the legend.
    pub title: String,
    /// The charts.
    pub panels: Vec<Panel>,
    /// The y axis's name.
    pub y_label: String,
    /// The y axis's range.
    pub y_range: (f64, f64),
    /// A horizontal reference line (50 for win rates).
    pub reference: Option<f64>,
    /// Every label, in legend (and colour) order.
    pub legend: Vec<String>,
}

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// Registers the first TrueType font found as `sans-serif` for plotters' text.
pub(crate) fn register_system_font() -> Result<()> {
    let path = FONT_PATHS.iter().map(PathBuf::from).find(|p| p.exists()).ok_or_else(|| {
        Error::system(
            "report",
            format!(
                "pictures need a TrueType font and none was found ({}); install fonts-dejavu-core",
                FONT_PATHS.join(", ")
            ),
        )
    })?;
    let bytes: &'static [u8] = Box::leak(std::fs::read(&path).with_path(&path)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| Error::invalid(&path, "not a usable TrueType font"))
}

fn colour(figure: &Figure, label: &str) -> RGBAColor {
    let i = figure.legend.iter().position(|l| l == label).unwrap_or(0);
    Palette99::pick(i).to_rgba()
}

const COLUMNS: usize = 3;
const LEGEND_HEIGHT: u32 = 34;

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, figure: &Figure) -> std::result::Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(&figure.title, ("sans-serif", 22)).map_err(e)?;
    let (legend, grid) = root.split_vertically(LEGEND_HEIGHT);
    // The shared legend: a short line and the label, left to right.
    let mut x = 20;
    for label in &figure.legend {
        let c = colour(figure, label);
        legend.draw(&PathElement::new(vec![(x, 17), (x + 24, 17)], c.stroke_width(3))).map_err(e)?;
        legend.draw(&Text::new(label.clone(), (x + 30, 9), ("sans-serif", 15))).map_err(e)?;
        x += 44 + 8 * label.chars().count() as i32;
    }
    let columns = COLUMNS.min(figure.panels.len()).max(1);
    let rows = figure.panels.len().div_ceil(columns);
    let areas = grid.split_evenly((rows, columns));
    let max_step =
        figure.panels.iter().flat_map(|p| &p.lines).flat_map(|l| &l.points).map(|p| p.0).max().unwrap_or(1).max(1);
    let x_end = max_step + (max_step / 50).max(1);
    let (y_low, y_high) = figure.y_range;
    for (panel, area) in figure.panels.iter().zip(areas.iter()) {
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(48)
            .build_cartesian_2d(0u64..x_end, y_low..y_high)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc(figure.y_label.as_str())
            .x_labels(6)
            .y_labels(6)
            .x_label_formatter(&|s| s.to_string())
            .draw()
            .map_err(e)?;
        if let Some(y) = figure.reference {
            chart.draw_series(LineSeries::new(vec![(0, y), (x_end, y)], BLACK.mix(0.3))).map_err(e)?;
        }
        for line in &panel.lines {
            let c = colour(figure, &line.label);
            let band: Vec<(u64, f64, f64)> = line
                .points
                .iter()
                .filter_map(|&(s, _, i)| i.map(|(lo, hi)| (s, lo.max(y_low), hi.min(y_high))))
                .collect();
            if band.len() >= 2 {
                let outline: Vec<(u64, f64)> = band
                    .iter()
                    .map(|&(s, lo, _)| (s, lo))
                    .chain(band.iter().rev().map(|&(s, _, hi)| (s, hi)))
                    .collect();
                chart.draw_series(std::iter::once(Polygon::new(outline, c.mix(0.15).filled()))).map_err(e)?;
            } else if let Some(&(s, lo, hi)) = band.first() {
                chart
                    .draw_series(std::iter::once(PathElement::new(vec![(s, lo), (s, hi)], c.mix(0.5).stroke_width(2))))
                    .map_err(e)?;
            }
            let points: Vec<(u64, f64)> = line.points.iter().map(|&(s, v, _)| (s, v)).collect();
            chart.draw_series(LineSeries::new(points, c.stroke_width(2)).point_size(2)).map_err(e)?;
        }
    }
    root.present().map_err(e)
}

/// Draws `figure` to `out` (`.svg` or `.png`), through a temporary name renamed into place.
/// `flag` names the option that gave `out`, for the error about its extension.
pub fn write_figure(figure: &Figure, out: &Path, flag: &str) -> Result<()> {
    let rows = figure.panels.len().div_ceil(COLUMNS).max(1) as u32;
    let size = (1200, 330 * rows + 40 + LEGEND_HEIGHT);
    let ext = out.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
    // The image encoder picks the format from the extension, so the temporary name keeps it.
    let staging = indolm_core::files::Staging::keeping_extension(out);
    let tmp = staging.path().to_path_buf();
    let result = match ext.as_str() {
        "svg" => {
            register_system_font()?;
            draw(SVGBackend::new(&tmp, size).into_drawing_area(), figure)
        }
        "png" => {
            register_system_font()?;
            draw(BitMapBackend::new(&tmp, size).into_drawing_area(), figure)
        }
        other => {
            return Err(Error::argument(flag, format!("expected a .svg or .png file name, found extension {other:?}")))
        }
    };
    if let Err(message) = result {
        return Err(Error::invalid(out, format!("drawing failed: {message}")));
    }
    staging.commit()
}

/// Panels in order of first appearance with `overall` last, from (panel, label, point) items.
pub(crate) fn panels_from_points(items: impl IntoIterator<Item = (String, String, Point)>) -> Vec<Panel> {
    let mut panels: Vec<Panel> = Vec::new();
    for (panel, label, point) in items {
        let p = match panels.iter().position(|p| p.title == panel) {
            Some(i) => &mut panels[i],
            None => {
                panels.push(Panel { title: panel, lines: Vec::new() });
                panels.last_mut().unwrap()
            }
        };
        match p.lines.iter_mut().find(|l| l.label == label) {
            Some(l) => l.points.push(point),
            None => p.lines.push(Line { label, points: vec![point] }),
        }
    }
    panels.sort_by_key(|p| p.title == "overall");
    for p in panels.iter_mut() {
        for l in p.lines.iter_mut() {
            l.points.sort_by_key(|pt| pt.0);
        }
    }
    panels
}
