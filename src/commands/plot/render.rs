//! A picture as SVG text or PNG bytes, with the font the binary ships, written atomically.
//!
//! Text is drawn by plotters' `ab_glyph` backend from `assets/fonts/DejaVuSans-subset.ttf`,
//! built in, so a PNG has its labels on a machine with no fonts installed (CI, containers);
//! the SVG names the family and a viewer draws it with its own sans-serif.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

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
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
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

    #[test]
    fn an_svg_names_its_title_and_draws_each_point() {
        let text = svg(&timeline()).unwrap();
        assert!(text.starts_with("<svg") && text.contains("\nQPS\n</text>"), "{}", &text[..300]);
        assert_eq!(text.matches("<circle").count(), 3);
    }
}
