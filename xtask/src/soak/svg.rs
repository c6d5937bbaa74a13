//! The soak's plot, `soak.svg`: RSS, open descriptors and successful req/s over time, one panel
//! each on a shared time axis, with every fault window shaded and named. Written by hand as
//! SVG text (a few hundred lines of output) rather than through a plotting crate, so xtask
//! gains no dependency for one picture; pure, so its shape is unit-tested.

use std::fmt::Write;

use super::verdict::{Fault, FaultKind, Second};

const WIDTH: f64 = 1000.0;
const PANEL_HEIGHT: f64 = 180.0;
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_RIGHT: f64 = 20.0;
const MARGIN_TOP: f64 = 60.0;
const GAP: f64 = 40.0;

/// One panel: a title, a colour and the value of each second.
struct Panel {
    title: &'static str,
    colour: &'static str,
    value: fn(&Second) -> f64,
}

const PANELS: [Panel; 3] = [
    Panel {
        title: "RSS (MiB)",
        colour: "#1f77b4",
        value: |s| s.rss_kib as f64 / 1024.0,
    },
    Panel {
        title: "open descriptors",
        colour: "#2ca02c",
        value: |s| s.fds as f64,
    },
    Panel {
        title: "successful req/s",
        colour: "#d62728",
        value: |s| s.ok as f64,
    },
];

/// The whole SVG document. `rate` draws a dashed target line in the req/s panel.
pub fn plot(seconds: &[Second], faults: &[Fault], rate: f64) -> String {
    let height = MARGIN_TOP + 3.0 * (PANEL_HEIGHT + GAP) + 10.0;
    let span = (seconds.len() as f64).max(1.0);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(
        svg,
        "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{MARGIN_LEFT}\" y=\"18\" font-size=\"14\">Squall soak: {} s, {rate} req/s \
         planned, {} faults (shaded)</text>",
        span,
        faults.len()
    );
    legend(&mut svg, faults);
    for (index, panel) in PANELS.iter().enumerate() {
        let top = MARGIN_TOP + index as f64 * (PANEL_HEIGHT + GAP);
        let target = (index == 2).then_some(rate);
        draw_panel(&mut svg, panel, top, span, seconds, faults, target);
    }
    svg.push_str("</svg>\n");
    svg
}

/// One panel: frame, fault windows, axis labels and the line.
fn draw_panel(
    svg: &mut String,
    panel: &Panel,
    top: f64,
    span: f64,
    seconds: &[Second],
    faults: &[Fault],
    target: Option<f64>,
) {
    let plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT;
    let x = |t: f64| MARGIN_LEFT + t.clamp(0.0, span) / span * plot_width;
    let values: Vec<f64> = seconds.iter().map(panel.value).collect();
    let max = values
        .iter()
        .copied()
        .chain(target)
        .fold(0.0_f64, f64::max)
        .max(1.0)
        * 1.1;
    let y = |v: f64| top + PANEL_HEIGHT - v / max * PANEL_HEIGHT;
    let _ = writeln!(
        svg,
        "<g class=\"panel\"><text x=\"{MARGIN_LEFT}\" y=\"{:.1}\">{}</text>",
        top - 4.0,
        escape(panel.title)
    );
    for fault in faults {
        let (x0, x1) = (x(fault.start), x(fault.end.max(fault.start + 1.0)));
        let _ = writeln!(
            svg,
            "<rect class=\"fault\" x=\"{x0:.1}\" y=\"{top:.1}\" width=\"{:.1}\" \
             height=\"{PANEL_HEIGHT}\" fill=\"{}\" fill-opacity=\"0.25\">\
             <title>{} at {:.1} s</title></rect>",
            (x1 - x0).max(1.0),
            fault_colour(fault.kind),
            escape(fault.kind.name()),
            fault.start
        );
    }
    let _ = writeln!(
        svg,
        "<rect x=\"{MARGIN_LEFT}\" y=\"{top:.1}\" width=\"{plot_width:.1}\" \
         height=\"{PANEL_HEIGHT}\" fill=\"none\" stroke=\"#888\"/>"
    );
    axis_labels(svg, top, max, span, &x);
    if let Some(rate) = target {
        let _ = writeln!(
            svg,
            "<line x1=\"{MARGIN_LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#555\" \
             stroke-dasharray=\"4 3\"/>",
            MARGIN_LEFT + plot_width,
            y(rate),
            y(rate)
        );
    }
    let points: Vec<String> = seconds
        .iter()
        .zip(&values)
        .map(|(s, v)| format!("{:.1},{:.1}", x(f64::from(s.t)), y(*v)))
        .collect();
    let _ = writeln!(
        svg,
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/></g>",
        panel.colour,
        points.join(" ")
    );
}

/// A coloured square and the name of each kind of fault that happened, under the title.
fn legend(svg: &mut String, faults: &[Fault]) {
    let mut kinds: Vec<FaultKind> = Vec::new();
    for fault in faults {
        if !kinds.contains(&fault.kind) {
            kinds.push(fault.kind);
        }
    }
    for (i, kind) in kinds.iter().enumerate() {
        let x = MARGIN_LEFT + i as f64 * 120.0;
        let _ = writeln!(
            svg,
            "<rect class=\"legend\" x=\"{x:.1}\" y=\"28\" width=\"10\" height=\"10\" \
             fill=\"{}\" fill-opacity=\"0.5\"/><text x=\"{:.1}\" y=\"37\">{}</text>",
            fault_colour(*kind),
            x + 14.0,
            escape(kind.name())
        );
    }
}

/// The value at the top and bottom of the y axis, and the time at five ticks of the x axis.
fn axis_labels(svg: &mut String, top: f64, max: f64, span: f64, x: &dyn Fn(f64) -> f64) {
    let bottom = top + PANEL_HEIGHT;
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{max:.0}</text>\
         <text x=\"{:.1}\" y=\"{bottom:.1}\" text-anchor=\"end\">0</text>",
        MARGIN_LEFT - 4.0,
        top + 10.0,
        MARGIN_LEFT - 4.0
    );
    for tick in 0..=4 {
        let t = span * f64::from(tick) / 4.0;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{t:.0} s</text>",
            x(t),
            bottom + 14.0
        );
    }
}

fn fault_colour(kind: FaultKind) -> &'static str {
    match kind {
        FaultKind::OriginDown => "#ff7f0e",
        FaultKind::Reload => "#9467bd",
        FaultKind::Slowloris => "#8c564b",
        FaultKind::SlowReaders => "#e377c2",
        FaultKind::Flood => "#bcbd22",
    }
}

/// Text made safe for SVG (XML) content and attribute values.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seconds(n: u32) -> Vec<Second> {
        (0..n)
            .map(|t| Second {
                t,
                rss_kib: 40_960 + u64::from(t),
                fds: 50,
                ok: 500,
                ..Second::default()
            })
            .collect()
    }

    fn fault(kind: FaultKind, start: f64, end: f64) -> Fault {
        Fault {
            kind,
            start,
            end,
            note: String::new(),
            ok: true,
        }
    }

    #[test]
    fn three_panels_with_every_fault_shaded_in_each() {
        let faults = [
            fault(FaultKind::OriginDown, 20.0, 25.0),
            fault(FaultKind::Reload, 40.0, 40.2),
        ];
        let svg = plot(&seconds(60), &faults, 500.0);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert_eq!(svg.matches("class=\"fault\"").count(), 3 * faults.len());
        assert_eq!(svg.matches("<g class=\"panel\">").count(), 3);
        assert_eq!(svg.matches("</g>").count(), 3);
        assert_eq!(svg.matches("stroke-dasharray").count(), 1);
        // One point per second in each line.
        let line = svg.lines().find(|l| l.contains("<polyline")).unwrap();
        assert_eq!(line.matches(',').count(), 60);
        assert!(svg.contains("<title>origin down at 20.0 s</title>"));
        assert_eq!(svg.matches("class=\"legend\"").count(), 2);
        assert!(
            svg.contains(">60 s</text>"),
            "the last tick is the run's length"
        );
        assert!(svg.lines().count() < 400);
    }

    #[test]
    fn points_stay_inside_their_panel() {
        let svg = plot(&seconds(30), &[], 500.0);
        for line in svg.lines().filter(|l| l.contains("<polyline")) {
            let points = line.split("points=\"").nth(1).unwrap();
            for pair in points.trim_end_matches("\"/></g>").split(' ') {
                let (x, y) = pair.split_once(',').unwrap();
                let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                assert!((MARGIN_LEFT..=WIDTH - MARGIN_RIGHT).contains(&x), "{x}");
                assert!((MARGIN_TOP..=MARGIN_TOP + 3.0 * (PANEL_HEIGHT + GAP)).contains(&y));
            }
        }
    }

    #[test]
    fn empty_series_and_escaping() {
        let svg = plot(&[], &[], 0.0);
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
        assert_eq!(escape("a<b & \"c\">"), "a&lt;b &amp; &quot;c&quot;&gt;");
    }
}
