//! A picture as SVG text or PNG bytes, with the font the binary ships, written atomically.
//!
//! Text is drawn from `assets/fonts/DejaVuSans-subset.ttf`, built in, so a PNG has its labels
//! on a machine with no fonts installed (CI, containers); the SVG names the family and a
//! viewer draws it with its own sans-serif. In a PNG each glyph is laid out here
//! (`GlyphText`), because plotters' own ab_glyph drawing drops every glyph's left side
//! bearing and so spaces `TTFT` as `TTF T`.

use std::path::Path;
use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, ScaleFont};
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

use super::chart::{draw, size_of, Picture};

/// DejaVu Sans cut to Latin-1 and the chart signs (assets/fonts/README.md).
static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans-subset.ttf");

/// Registers the built-in font as plotters' "sans-serif", once per process.
fn register_font() -> Result<(), String> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    ok.then_some(()).ok_or_else(|| "the built-in font does not load; please report it".into())
}

/// Which files each picture is written as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Svg,
    Png,
    Both,
}

impl Format {
    /// The file extensions this format writes.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Format::Svg => &["svg"],
            Format::Png => &["png"],
            Format::Both => &["svg", "png"],
        }
    }
}

/// The picture as an SVG document.
pub fn svg(picture: &Picture) -> Result<String, String> {
    register_font()?;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, size_of(picture)).into_drawing_area();
        draw(picture, &root).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(text)
}

/// The picture as PNG bytes (8-bit RGB): plotters draws into our buffer, `png` encodes it.
pub fn png(picture: &Picture) -> Result<Vec<u8>, String> {
    register_font()?;
    let (w, h) = size_of(picture);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = GlyphText::bitmap(&mut rgb, (w, h))?.into_drawing_area();
        draw(picture, &root).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(&rgb).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

/// Calls `put(x, y, coverage)` for each pixel of `text` set in `font` at `size_px`, from a pen
/// at x = 0 with the baseline where plotters puts it (half the size below the top): each glyph
/// at the pen plus its left side bearing, the pen moved by its advance and the kerning.
fn glyph_pixels(font: &FontRef<'_>, size_px: f32, text: &str, mut put: impl FnMut(i32, i32, f32)) {
    let scaled = font.as_scaled(size_px);
    let mut pen = 0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(prev) = prev {
            pen += scaled.kern(prev, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(size_px, ab_glyph::point(pen, 0.0));
        if let Some(outline) = scaled.outline_glyph(glyph) {
            let bounds = outline.px_bounds();
            let (x0, y0) = (bounds.min.x as i32, (size_px / 2.0 + bounds.min.y) as i32);
            outline.draw(|x, y, coverage| put(x0 + x as i32, y0 + y as i32, coverage));
        }
        pen += scaled.h_advance(id);
    }
}

/// A bitmap backend whose text is laid out by [`glyph_pixels`]; everything else is the inner
/// backend's own drawing.
struct GlyphText<B> {
    inner: B,
    font: FontRef<'static>,
}

impl<'a> GlyphText<BitMapBackend<'a>> {
    fn bitmap(rgb: &'a mut [u8], size: (u32, u32)) -> Result<Self, String> {
        let font = FontRef::try_from_slice(FONT)
            .map_err(|_| "the built-in font does not load; please report it".to_string())?;
        Ok(GlyphText { inner: BitMapBackend::with_buffer(rgb, size), font })
    }
}

type Drew<B> = Result<(), DrawingErrorKind<<B as DrawingBackend>::ErrorType>>;

impl<B: DrawingBackend> DrawingBackend for GlyphText<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Drew<B> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Drew<B> {
        self.inner.present()
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Drew<B> {
        self.inner.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        s: &S,
    ) -> Drew<B> {
        self.inner.draw_line(from, to, s)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Drew<B> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Drew<B> {
        self.inner.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Drew<B> {
        self.inner.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Drew<B> {
        self.inner.fill_polygon(vert, style)
    }
    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> Drew<B> {
        self.inner.blit_bitmap(pos, size, src)
    }

    /// plotters' own placement (the layout box, the anchor, the rotation), with the glyphs of
    /// [`glyph_pixels`].
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Drew<B> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let layout =
            style.layout_box(text).map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let ((min_x, min_y), (max_x, max_y)) = layout;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let transform = style.transform();
        let (w, h) = self.get_size();
        let mut drew = Ok(());
        glyph_pixels(&self.font, style.size() as f32, text, |x, y, coverage| {
            let (x, y) = transform.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if drew.is_ok() && x >= 0 && y >= 0 && x < w as i32 && y < h as i32 {
                let alpha = color.alpha * f64::from(coverage);
                drew = self.inner.draw_pixel((x, y), BackendColor { alpha, rgb: color.rgb });
            }
        });
        drew
    }
}

/// Renders `picture` as `ext` and writes `path` through a temporary name, so a failed write
/// leaves no half file. `Err((drawing_failed, message))`.
pub fn write(picture: &Picture, ext: &str, path: &Path) -> Result<(), (bool, String)> {
    let bytes = match ext {
        "svg" => svg(picture).map(String::into_bytes),
        _ => png(picture),
    }
    .map_err(|e| (true, e))?;
    crate::report::write_atomic(path, &bytes).map_err(|e| (false, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::plot::chart::{Line, Timeline};

    fn timeline() -> Picture {
        Picture::Timeline(Timeline {
            title: "QPS".into(),
            y_label: "completions per second".into(),
            seconds: 3.0,
            lines: vec![Line {
                label: "completions/s".into(),
                color: super::super::chart::palette::RATE,
                points: vec![(0.5, 10.0), (1.5, 12.0), (2.5, 11.0)],
            }],
            caption: "n = 33".into(),
        })
    }

    #[test]
    fn a_png_is_drawn_with_the_built_in_font_and_decodes() {
        let bytes = png(&timeline()).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (900, 480));
        let dark = buf.chunks(3).filter(|p| p.iter().all(|&c| c < 80)).count();
        assert!(dark > 500, "text and axes are drawn: {dark} dark pixels");
    }

    /// The leftmost column of `text` drawn at x = 10 in a PNG at 40 px, and where the font puts
    /// its first glyph's ink (the pen plus the left side bearing).
    fn first_ink_column(text: &str) -> (usize, usize) {
        register_font().unwrap();
        let (w, h) = (200u32, 60u32);
        let mut rgb = vec![0u8; (w * h * 3) as usize];
        {
            let root = GlyphText::bitmap(&mut rgb, (w, h)).unwrap().into_drawing_area();
            root.fill(&WHITE).unwrap();
            let style = ("sans-serif", 40).into_font().color(&BLACK);
            root.draw(&Text::new(text.to_string(), (10, 10), style)).unwrap();
            root.present().unwrap();
        }
        let inked = |x: usize| (0..h as usize).any(|y| rgb[(y * w as usize + x) * 3] < 128);
        let drawn = (0..w as usize).find(|&x| inked(x)).expect("ink");
        let font = FontRef::try_from_slice(FONT).unwrap();
        let scaled = font.as_scaled(40.0);
        let bearing = scaled.h_side_bearing(scaled.glyph_id(text.chars().next().unwrap()));
        (drawn, 10 + bearing.round() as usize)
    }

    #[test]
    fn png_text_keeps_each_glyph_s_side_bearing_so_ttft_is_not_spaced_ttf_t() {
        // F's left side bearing is about 0.1 em (4 px at 40 px): plotters' own drawing put its
        // ink at the pen, 4 px too far left, which read `TTFT` as `TTF T` at label size.
        for text in ["F", "FT"] {
            let (drawn, expected) = first_ink_column(text);
            assert!(expected >= 13, "F has a visible side bearing: {expected}");
            assert!(
                drawn.abs_diff(expected) <= 1,
                "{text}: ink at {drawn}, the font puts it at {expected}"
            );
        }
        // Each glyph of "TTFT" lands at its pen plus its bearing: its F's stem starts where
        // the font says, not one bearing early.
        let font = FontRef::try_from_slice(FONT).unwrap();
        let mut columns = std::collections::BTreeSet::new();
        glyph_pixels(&font, 40.0, "TTFT", |x, _, c| {
            if c > 0.5 {
                columns.insert(x);
            }
        });
        let scaled = font.as_scaled(40.0);
        let t = scaled.glyph_id('T');
        let f = scaled.glyph_id('F');
        let pen_f = 2.0 * scaled.h_advance(t) + scaled.kern(t, t) * 2.0 + scaled.kern(t, f);
        let stem = (pen_f + scaled.h_side_bearing(f)).round() as i32;
        assert!(columns.contains(&stem) && !columns.contains(&(stem - 2)), "F's stem at {stem}");
    }

    #[test]
    fn the_maximum_is_a_guide_beside_the_curve_not_its_last_point() {
        // The observed run: TTFT flat at 189.6 ms, p99 200.9 ms, the maximum 222.8 ms; the
        // curve of 100 values ends at p99 and used to draw the maximum there.
        let mut values = vec![189.6e6; 90];
        values.extend(
            [190.0, 191.0, 192.0, 193.0, 194.0, 195.0, 196.0, 197.0, 200.9, 222.8].map(|v| v * 1e6),
        );
        let picture = super::super::pictures::distribution("TTFT", "TTFT", &values).unwrap();
        let text = svg(&picture).unwrap();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let points = |n: roxmltree::Node<'_, '_>| -> Vec<(f64, f64)> {
            let xy =
                |p: &str| p.split_once(',').map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap()));
            n.attribute("points").unwrap_or_default().split_whitespace().filter_map(xy).collect()
        };
        let polylines = |colour: &str| -> Vec<Vec<(f64, f64)>> {
            let stroked = |n: &roxmltree::Node<'_, '_>| n.attribute("stroke") == Some(colour);
            doc.descendants()
                .filter(|n| n.has_tag_name("polyline") && stroked(n))
                .map(points)
                .collect()
        };
        let curve = polylines("#D62728").into_iter().max_by_key(Vec::len).unwrap();
        let last_y = curve.last().unwrap().1;
        // The maximum's guide: the horizontal grey line in the curve's half (x past 600 px).
        let guide = polylines("#7F7F7F").into_iter().find(|l| l[0].0 > 600.0 && l[0].1 == l[1].1);
        let max_y = guide.expect("a guide line at the maximum")[0].1;
        assert!(
            max_y + 20.0 < last_y,
            "the curve's end ({last_y} px) is not at the max ({max_y} px)"
        );
        let labels: Vec<&str> = doc.descendants().filter_map(|n| n.text()).map(str::trim).collect();
        assert!(labels.contains(&"max 222.8"), "{labels:?}");
        assert!(labels.contains(&"p99") && labels.contains(&"p50"), "{labels:?}");
    }

    #[test]
    fn pictures_of_degenerate_values_are_drawn_and_their_drawing_ends() {
        use super::super::pictures;
        use crate::report::plot_data::series::RunSeries;
        // Every stamp at the end of the clock: no span, no latency, no width to divide.
        let series = RunSeries {
            spans_ns: vec![(u64::MAX, u64::MAX); 3],
            latency_ns: vec![0.0; 3],
            ttft_ns: vec![0.0; 3],
            t0_ns: u64::MAX,
            end_ns: u64::MAX,
            ..RunSeries::default()
        };
        let facts = pictures::RunFacts {
            streaming: true,
            basis: loadgen_coordinator::metrics::TokenCountSource::Client,
            has_tokenizer: false,
            tokenizer_named: false,
        };
        let plan = pictures::performance(&series, facts);
        let drawn: Vec<&str> = plan.pictures.iter().map(|(name, _)| *name).collect();
        assert_eq!(drawn, ["ttft", "latency", "qps", "in_flight"]);
        for (name, picture) in &plan.pictures {
            assert!(svg(picture).is_ok(), "{name}");
        }
        // Values far out and all equal, and a series with infinite and NaN points.
        let far = pictures::distribution("far", "latency", &[u64::MAX as f64; 3]).unwrap();
        assert!(svg(&far).is_ok());
        let Picture::Timeline(mut t) = timeline() else { unreachable!() };
        t.lines[0].points = vec![(0.5, f64::INFINITY), (1.5, f64::NAN), (f64::INFINITY, 1.0)];
        t.seconds = f64::INFINITY;
        assert!(svg(&Picture::Timeline(t)).is_ok());
    }

    #[test]
    fn an_svg_names_its_title_and_draws_each_point() {
        let text = svg(&timeline()).unwrap();
        assert!(text.starts_with("<svg") && text.contains("\nQPS\n</text>"), "{}", &text[..300]);
        assert_eq!(text.matches("<circle").count(), 3);
    }
}
