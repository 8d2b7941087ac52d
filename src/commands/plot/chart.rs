//! The four kinds of picture and how plotters draws each, on any backend (SVG or bitmap).
//!
//! Every series has its own colour (`palette`), so a reader of the SVG (and the tests) can
//! tell the histogram's bars from the percentile curve's line by colour alone.

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::plot_data::bins::{percentile_at, Histogram};

/// The series colours (matplotlib's tab10, which reads well on white and in print).
pub mod palette {
    use plotters::style::RGBColor;
    pub const BARS: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
    pub const CURVE: RGBColor = RGBColor(0xd6, 0x27, 0x28);
    pub const RATE: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
    pub const MEAN: RGBColor = RGBColor(0x94, 0x67, 0xbd);
    pub const PEAK: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
    pub const MEDIAN: RGBColor = RGBColor(0x17, 0xbe, 0xcf);
    pub const POINTS: RGBColor = RGBColor(0x8c, 0x56, 0x4b);
    pub const GUIDE: RGBColor = RGBColor(0x7f, 0x7f, 0x7f);
}

/// A distribution: its histogram (left) and percentile curve (right), in display units.
#[derive(Debug, Clone)]
pub struct Distribution {
    pub title: String,
    /// "TTFT (ms)": the value axis of both panels.
    pub value_label: String,
    pub hist: Histogram,
    /// (nines x, value) points; see `bins::percentile_curve`.
    pub curve: Vec<(f64, f64)>,
    /// The nines x of each labelled percentile (`bins::curve_ticks`): the curve's axis ticks.
    pub curve_ticks: Vec<f64>,
    /// The largest value (p100, off the nines axis): a guide line beside the curve.
    pub max: f64,
    /// Vertical marks on the histogram (p50, p99) with their labels.
    pub marks: Vec<(String, f64)>,
    pub caption: String,
    /// A second caption line: what the picture cannot show (streams that came in one read).
    pub caption_note: Option<String>,
}

/// One line of a time series: a value per second of the run.
#[derive(Debug, Clone)]
pub struct Line {
    pub label: String,
    pub color: RGBColor,
    /// (seconds since the start, value).
    pub points: Vec<(f64, f64)>,
}

/// Values over the run's seconds.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub title: String,
    pub y_label: String,
    pub seconds: f64,
    pub lines: Vec<Line>,
    pub caption: String,
}

/// One point per sample, with the y = x guide.
#[derive(Debug, Clone)]
pub struct Scatter {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub points: Vec<(f64, f64)>,
    pub caption: String,
}

/// One bar per named value.
#[derive(Debug, Clone)]
pub struct Bars {
    pub title: String,
    pub y_label: String,
    pub bars: Vec<(String, f64)>,
    /// The value the axis runs to whatever the bars are (1 for scores); `None`: the largest.
    pub full_scale: Option<f64>,
    /// A second bar beside each (e.g. the ceiling), when the picture compares two.
    pub beside: Option<(String, Vec<Option<f64>>)>,
    pub bar_label: String,
    pub caption: String,
}

/// Values per turn number of an agentic run's conversations: one line per percentile.
#[derive(Debug, Clone)]
pub struct PerTurn {
    pub title: String,
    pub y_label: String,
    /// The turn numbers that have values, ascending: the x axis's ticks.
    pub turns: Vec<u32>,
    /// (turn number, value) points of each line.
    pub lines: Vec<Line>,
    pub caption: String,
}

/// Lines over a numeric x axis (a sweep's points), with guide lines across the chart: a
/// vertical one at an x (the knee), a horizontal one at a y (an objective's bound).
#[derive(Debug, Clone)]
pub struct Curves {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
    /// (label, colour, `Some(x)` vertical / `None` then horizontal at `y`, y).
    pub guides: Vec<Guide>,
    pub caption: String,
}

/// A guide line of `Curves`.
#[derive(Debug, Clone)]
pub struct Guide {
    pub label: String,
    pub color: RGBColor,
    /// Vertical at this x, or horizontal at `y`.
    pub x: Option<f64>,
    pub y: f64,
}

/// A picture to write.
#[derive(Debug, Clone)]
pub enum Picture {
    Distribution(Distribution),
    Timeline(Timeline),
    Scatter(Scatter),
    Bars(Bars),
    PerTurn(PerTurn),
    Curves(Curves),
}

/// Pixel size of a picture of this kind.
pub fn size_of(picture: &Picture) -> (u32, u32) {
    match picture {
        Picture::Distribution(_) => (1200, 480),
        Picture::Timeline(_) | Picture::Scatter(_) | Picture::PerTurn(_) => (900, 480),
        Picture::Curves(_) => (900, 520),
        Picture::Bars(b) => ((300 + 90 * b.bars.len() as u32).clamp(700, 1600), 480),
    }
}

/// Height of one caption line.
const CAPTION_LINE_PX: u32 = 18;

/// The largest magnitude an axis end may have: far past any value a run gives (ns as f64 are
/// below 2e19), and far enough below `f64::MAX` that padding an end stays finite.
const AXIS_END_MAX: f64 = 1e300;

/// An axis range plotters can tick: both ends finite, and the upper above the lower by a
/// width that their magnitude does not swallow. plotters' tick search loops without end over
/// an infinite range and panics on NaN, and two ends that are one number as f64 (every
/// stamp equal, far out) leave it nothing to divide.
fn axis(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let finite =
        |v: f64, or: f64| if v.is_finite() { v.clamp(-AXIS_END_MAX, AXIS_END_MAX) } else { or };
    let lo = finite(lo, 0.0);
    let hi = finite(hi, lo);
    let least = (lo.abs().max(hi.abs()) * 1e-6).max(1e-9);
    if hi - lo >= least {
        lo..hi
    } else {
        lo..lo + least
    }
}
/// Height of the strip above a chart that holds its legend, clear of the data.
const LEGEND_STRIP_PX: u32 = 26;

type Drawn<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Draws `picture` on `root`, white background first.
pub fn draw<DB: DrawingBackend>(picture: &Picture, root: &DrawingArea<DB, Shift>) -> Drawn<DB> {
    root.fill(&WHITE)?;
    let (title, caption) = match picture {
        Picture::Distribution(d) => (&d.title, &d.caption),
        Picture::Timeline(t) => (&t.title, &t.caption),
        Picture::Scatter(s) => (&s.title, &s.caption),
        Picture::Bars(b) => (&b.title, &b.caption),
        Picture::PerTurn(t) => (&t.title, &t.caption),
        Picture::Curves(c) => (&c.title, &c.caption),
    };
    let note = match picture {
        Picture::Distribution(d) => d.caption_note.as_deref(),
        _ => None,
    };
    let lines: Vec<&str> = std::iter::once(caption.as_str()).chain(note).collect();
    let body = root.titled(title, ("sans-serif", 22))?;
    let (_, h) = body.dim_in_pixel();
    let foot_px = 8 + CAPTION_LINE_PX * lines.len() as u32;
    let (body, foot) = body.split_vertically(h.saturating_sub(foot_px));
    for (i, line) in lines.iter().enumerate() {
        let y = 4 + CAPTION_LINE_PX as i32 * i as i32;
        foot.draw(&Text::new(*line, (12, y), ("sans-serif", 14).into_font()))?;
    }
    match picture {
        Picture::Distribution(d) => draw_distribution(d, &body),
        Picture::Timeline(t) => draw_timeline(t, &body),
        Picture::Scatter(s) => draw_scatter(s, &body),
        Picture::Bars(b) => draw_bars(b, &body),
        Picture::PerTurn(t) => draw_per_turn(t, &body),
        Picture::Curves(c) => draw_curves(c, &body),
    }
}

/// An axis or bar label: four significant digits at most, without trailing zeros (80, 62.5,
/// 0.125), so one axis does not mix "120" and "80.0".
fn tick(v: f64) -> String {
    let a = v.abs();
    let decimals = if a >= 1000.0 || v == 0.0 {
        0
    } else {
        (3 - a.log10().floor() as i32).clamp(0, 6) as usize
    };
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// `p99.9` for a nines-axis coordinate.
fn percentile_tick(x: f64) -> String {
    let p = percentile_at(x);
    let text = format!("{p:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("p{text}")
}

fn draw_distribution<DB: DrawingBackend>(
    d: &Distribution,
    area: &DrawingArea<DB, Shift>,
) -> Drawn<DB> {
    let (left, right) = area.split_horizontally(area.dim_in_pixel().0 / 2);
    let h = &d.hist;
    let y_max = h.counts.iter().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
    let mut chart = ChartBuilder::on(&left)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .caption("histogram", ("sans-serif", 16))
        .build_cartesian_2d(axis(h.lo, h.hi), axis(0.0, y_max))?;
    chart
        .configure_mesh()
        .x_desc(d.value_label.as_str())
        .y_desc("samples")
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    let width = h.bin_width();
    chart.draw_series(h.counts.iter().enumerate().map(|(i, &count)| {
        let x0 = h.lo + width * i as f64;
        Rectangle::new([(x0, 0.0), (x0 + width, count as f64)], palette::BARS.filled())
    }))?;
    for (label, at) in d.marks.iter().filter(|(_, at)| *at >= h.lo && *at <= h.hi) {
        let mark = PathElement::new(vec![(*at, 0.0), (*at, y_max)], palette::GUIDE.stroke_width(1));
        chart.draw_series(std::iter::once(mark))?;
        let text = Text::new(label.clone(), (*at, y_max * 0.97), ("sans-serif", 13).into_font());
        chart.draw_series(std::iter::once(text))?;
    }
    draw_curve(d, &right)
}

/// The percentile curve, its axis ticked at the percentiles it passes through, and the
/// maximum as a guide line of its own (p100 is off any nines axis).
fn draw_curve<DB: DrawingBackend>(d: &Distribution, area: &DrawingArea<DB, Shift>) -> Drawn<DB> {
    let x_max = d.curve.last().map_or(1.0, |p| p.0).max(0.5);
    let v_max = d.curve.iter().map(|p| p.1).fold(d.max, f64::max);
    let v_min = d.curve.first().map_or(0.0, |p| p.1);
    let pad = ((v_max - v_min) * 0.05).max(v_max.abs() * 0.01).max(1e-9);
    let x_axis = NinesAxis { inner: axis(0.0, x_max).into(), ticks: d.curve_ticks.clone() };
    let mut curve = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .caption("percentiles", ("sans-serif", 16))
        .build_cartesian_2d(x_axis, axis((v_min - pad).max(0.0), v_max + pad))?;
    curve
        .configure_mesh()
        .y_label_formatter(&|v| tick(*v))
        .x_desc("percentile")
        .y_desc(d.value_label.as_str())
        .draw()?;
    let guide =
        PathElement::new(vec![(0.0, d.max), (x_max, d.max)], palette::GUIDE.stroke_width(1));
    curve.draw_series(std::iter::once(guide))?;
    let label = format!("max {}", tick(d.max));
    let text = Text::new(label, (x_max * 0.02, d.max), ("sans-serif", 13).into_font());
    curve.draw_series(std::iter::once(text))?;
    curve.draw_series(LineSeries::new(d.curve.iter().copied(), palette::CURVE.stroke_width(2)))?;
    Ok(())
}

/// The curve's x axis: linear in nines, ticked only at the percentiles the curve passes
/// through (`Distribution::curve_ticks`) and labelled `p99.9`.
struct NinesAxis {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ranged for NinesAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

impl ValueFormatter<f64> for NinesAxis {
    fn format(value: &f64) -> String {
        percentile_tick(*value)
    }
}

/// A legend swatch: a short line, or a filled box for bars.
#[derive(Debug, Clone, Copy)]
enum Swatch {
    Line(RGBColor),
    Bar(RGBColor),
}

/// The legend in a strip of its own above the chart, so it never covers a point or a bar.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[(&str, Swatch)],
) -> Drawn<DB> {
    let font = TextStyle::from(("sans-serif", 14).into_font());
    let mid = LEGEND_STRIP_PX as i32 / 2;
    let mut x = 80;
    for (label, swatch) in entries {
        match *swatch {
            Swatch::Line(color) => {
                area.draw(&PathElement::new(vec![(x, mid), (x + 20, mid)], color.stroke_width(2)))?
            }
            Swatch::Bar(color) => {
                area.draw(&Rectangle::new([(x + 3, mid - 5), (x + 17, mid + 5)], color.filled()))?
            }
        }
        area.draw(&Text::new(label.to_string(), (x + 26, mid - 7), font.clone()))?;
        let (w, _) = area.estimate_text_size(label, &font)?;
        x += 26 + w as i32 + 24;
    }
    Ok(())
}

/// The points plotters can place: an infinite or NaN coordinate overflows its pixel arithmetic.
fn drawable(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite())
}

fn draw_timeline<DB: DrawingBackend>(t: &Timeline, area: &DrawingArea<DB, Shift>) -> Drawn<DB> {
    let (legend, area) = area.split_vertically(LEGEND_STRIP_PX);
    let entries: Vec<(&str, Swatch)> =
        t.lines.iter().map(|l| (l.label.as_str(), Swatch::Line(l.color))).collect();
    draw_legend(&legend, &entries)?;
    let y_max = t.lines.iter().flat_map(|l| drawable(&l.points).map(|p| p.1)).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(axis(0.0, t.seconds.max(1.0)), axis(0.0, y_max))?;
    chart
        .configure_mesh()
        .x_desc("seconds since the start")
        .y_desc(t.y_label.as_str())
        .y_label_formatter(&|v| tick(*v))
        .draw()?;
    for line in &t.lines {
        let color = line.color;
        chart.draw_series(LineSeries::new(drawable(&line.points), color.stroke_width(2)))?;
        chart.draw_series(drawable(&line.points).map(|p| Circle::new(p, 3, color.filled())))?;
    }
    Ok(())
}

/// Lines over turn numbers: the x axis runs half a turn past the first and last, ticked at
/// each turn number the picture has.
fn draw_per_turn<DB: DrawingBackend>(t: &PerTurn, area: &DrawingArea<DB, Shift>) -> Drawn<DB> {
    let (legend, area) = area.split_vertically(LEGEND_STRIP_PX);
    let entries: Vec<(&str, Swatch)> =
        t.lines.iter().map(|l| (l.label.as_str(), Swatch::Line(l.color))).collect();
    draw_legend(&legend, &entries)?;
    let first = t.turns.first().copied().unwrap_or(1) as f64;
    let last = t.turns.last().copied().unwrap_or(1) as f64;
    let y_max = t.lines.iter().flat_map(|l| drawable(&l.points).map(|p| p.1)).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(axis(first - 0.5, last + 0.5), axis(0.0, y_max))?;
    let turn_at = |x: &f64| {
        let whole = (x - x.round()).abs() < 1e-9;
        let turn = t.turns.iter().find(|&&turn| whole && f64::from(turn) == x.round());
        turn.map_or_else(String::new, |turn| turn.to_string())
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels((last - first) as usize + 2)
        .x_label_formatter(&turn_at)
        .x_desc("turn")
        .y_desc(t.y_label.as_str())
        .y_label_formatter(&|v| tick(*v))
        .draw()?;
    for line in &t.lines {
        let color = line.color;
        chart.draw_series(LineSeries::new(drawable(&line.points), color.stroke_width(2)))?;
        chart.draw_series(drawable(&line.points).map(|p| Circle::new(p, 3, color.filled())))?;
    }
    Ok(())
}

fn draw_curves<DB: DrawingBackend>(c: &Curves, area: &DrawingArea<DB, Shift>) -> Drawn<DB> {
    let (legend, area) = area.split_vertically(LEGEND_STRIP_PX);
    let entries: Vec<(&str, Swatch)> = c
        .lines
        .iter()
        .map(|l| (l.label.as_str(), Swatch::Line(l.color)))
        .chain(c.guides.iter().map(|g| (g.label.as_str(), Swatch::Line(g.color))))
        .collect();
    draw_legend(&legend, &entries)?;
    let points = || c.lines.iter().flat_map(|l| drawable(&l.points));
    let guide_x = c.guides.iter().filter_map(|g| g.x).filter(|x| x.is_finite());
    let guide_y = c.guides.iter().filter(|g| g.x.is_none()).map(|g| g.y);
    let x_max = points().map(|p| p.0).chain(guide_x).fold(0.0, f64::max);
    let y_max = points().map(|p| p.1).chain(guide_y.filter(|y| y.is_finite())).fold(0.0, f64::max);
    let (x_top, y_top) =
        (if x_max > 0.0 { x_max * 1.05 } else { 1.0 }, if y_max > 0.0 { y_max * 1.1 } else { 1.0 });
    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(axis(0.0, x_top), axis(0.0, y_top))?;
    chart
        .configure_mesh()
        .x_desc(c.x_label.as_str())
        .y_desc(c.y_label.as_str())
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()?;
    for g in &c.guides {
        let ends = match g.x {
            Some(x) => vec![(x, 0.0), (x, y_top)],
            None => vec![(0.0, g.y), (x_top, g.y)],
        };
        let ends: Vec<(f64, f64)> = drawable(&ends).collect();
        chart.draw_series(std::iter::once(PathElement::new(ends, g.color.stroke_width(1))))?;
    }
    for line in &c.lines {
        let color = line.color;
        chart.draw_series(LineSeries::new(drawable(&line.points), color.stroke_width(2)))?;
        chart.draw_series(drawable(&line.points).map(|p| Circle::new(p, 3, color.filled())))?;
    }
    Ok(())
}

fn draw_scatter<DB: DrawingBackend>(s: &Scatter, area: &DrawingArea<DB, Shift>) -> Drawn<DB> {
    let top = s.points.iter().map(|p| p.0.max(p.1)).fold(1.0, f64::max) * 1.05;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(axis(0.0, top), axis(0.0, top))?;
    chart
        .configure_mesh()
        .x_desc(s.x_label.as_str())
        .y_desc(s.y_label.as_str())
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .draw()?;
    let guide = PathElement::new(vec![(0.0, 0.0), (top, top)], palette::GUIDE.stroke_width(1));
    chart.draw_series(std::iter::once(guide))?;
    let style = palette::POINTS.mix(0.6).filled();
    chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, style)))?;
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(b: &Bars, area: &DrawingArea<DB, Shift>) -> Drawn<DB> {
    let (legend, area) = area.split_vertically(LEGEND_STRIP_PX);
    let mut entries = vec![(b.bar_label.as_str(), Swatch::Bar(palette::BARS))];
    if let Some((label, _)) = &b.beside {
        entries.push((label.as_str(), Swatch::Bar(palette::PEAK)));
    }
    draw_legend(&legend, &entries)?;
    let besides = b.beside.as_ref().map(|(_, v)| v.as_slice()).unwrap_or_default();
    let values = b.bars.iter().map(|v| v.1).chain(besides.iter().flatten().copied());
    let largest = values.fold(0.0, f64::max).max(b.full_scale.unwrap_or(0.0));
    // Room above the tallest bar for its value label.
    let top = if largest > 0.0 { largest * 1.1 } else { 1.0 };
    let n = b.bars.len();
    // Bar i is centred on x = i, so the axis's whole-number ticks name the bars.
    let mut chart = ChartBuilder::on(&area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, axis(0.0, top))?;
    let name_at = |x: &f64| {
        let whole = (x - x.round()).abs() < 1e-9 && *x >= 0.0;
        let name = b.bars.get(x.round() as usize).filter(|_| whole);
        name.map_or_else(String::new, |(name, _)| name.clone())
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&name_at)
        .y_desc(b.y_label.as_str())
        .y_label_formatter(&|v| tick(*v))
        .draw()?;
    let paired = b.beside.is_some();
    let wide = if paired { 0.38 } else { 0.7 };
    let left = |i: usize| i as f64 - if paired { wide } else { wide / 2.0 };
    let bars = b.bars.iter().enumerate().map(|(i, (_, v))| {
        Rectangle::new([(left(i), 0.0), (left(i) + wide, *v)], palette::BARS.filled())
    });
    chart.draw_series(bars)?;
    if let Some((_, values)) = &b.beside {
        let bars = values.iter().enumerate().filter_map(|(i, v)| {
            let at = i as f64;
            v.map(|v| Rectangle::new([(at, 0.0), (at + wide, v)], palette::PEAK.filled()))
        });
        chart.draw_series(bars)?;
    }
    for (i, (_, v)) in b.bars.iter().enumerate() {
        let text = Text::new(tick(*v), (left(i), v + top * 0.05), ("sans-serif", 13).into_font());
        chart.draw_series(std::iter::once(text))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_keep_four_significant_digits_without_trailing_zeros() {
        let cases = [(120.0, "120"), (80.0, "80"), (62.5, "62.5"), (0.125, "0.125"), (0.0, "0")];
        for (v, want) in cases {
            assert_eq!(tick(v), want, "{v}");
        }
        assert_eq!(tick(1234.56), "1235");
        assert_eq!(tick(4.56789), "4.568");
        assert_eq!(percentile_tick(3.0), "p99.9");
        assert_eq!(percentile_tick(0.0), "p0");
    }

    #[test]
    fn an_axis_is_finite_and_never_narrower_than_its_ends_can_tell_apart() {
        assert_eq!(axis(0.0, 10.0), 0.0..10.0);
        let far = u64::MAX as f64;
        for (lo, hi) in [
            (far, far),
            (0.0, f64::INFINITY),
            (f64::NAN, 1.0),
            (f64::NEG_INFINITY, f64::NAN),
            (5.0, 1.0),
            (0.0, 0.0),
        ] {
            let r = axis(lo, hi);
            assert!(r.start.is_finite() && r.end.is_finite(), "{lo}..{hi}: {r:?}");
            assert!(
                r.end > r.start && r.end - r.start >= r.start.abs() * 1e-7,
                "{lo}..{hi}: {r:?}"
            );
        }
    }
}
