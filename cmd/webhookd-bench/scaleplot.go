package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The scale plot: one row per curve (backlog, merchants), deliveries/s on
// the left and CPU ms per delivery by party on the right, against the
// curve's size on a log axis.
var (
	scaleCurves = []struct{ key, label string }{
		{"backlog", "pending deliveries at release"},
		{"merchants", "merchants (10 subscriptions each)"},
	}
	partyColors = map[string]color.Color{
		"engine":   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		"Postgres": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		"Redis":    color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	}
)

// writeScalePlot draws points as a PNG at path. A curve with no point is
// left out; a single point is drawn as a dot.
func writeScalePlot(path string, points []scalePoint) error {
	var rows [][]*plot.Plot
	for _, c := range scaleCurves {
		var mine []scalePoint
		for _, p := range points {
			if p.curve == c.key {
				mine = append(mine, p)
			}
		}
		if len(mine) == 0 {
			continue
		}
		rate, err := scaleRatePlot(c.label, mine)
		if err != nil {
			return err
		}
		cpu, err := scaleCPUPlot(c.label, mine)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{rate, cpu})
	}
	if len(rows) == 0 {
		return fmt.Errorf("scale plot: no points")
	}
	const w, h = 12 * vg.Inch, 4 * vg.Inch
	img := vgimg.New(w, h*vg.Length(len(rows)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		for j := range rows[i] {
			rows[i][j].Draw(canvases[i][j])
		}
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("scale plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(out); err != nil {
		out.Close()
		return fmt.Errorf("scale plot: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("scale plot: %w", err)
	}
	return nil
}

// newScalePlot is an empty plot against a log axis of sizes.
func newScalePlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	return p
}

// scaleRatePlot is deliveries/s against size.
func scaleRatePlot(xLabel string, points []scalePoint) (*plot.Plot, error) {
	p := newScalePlot("deliveries/s", xLabel, "deliveries/s")
	xy := make(plotter.XYs, len(points))
	for i, pt := range points {
		xy[i] = plotter.XY{X: float64(pt.size), Y: pt.deliveriesPerS}
	}
	if err := addLine(p, "", xy, partyColors["engine"]); err != nil {
		return nil, err
	}
	return p, nil
}

// scaleCPUPlot is CPU ms per delivery of each party against size.
func scaleCPUPlot(xLabel string, points []scalePoint) (*plot.Plot, error) {
	p := newScalePlot("CPU per delivery", xLabel, "CPU ms per delivery")
	parties := []struct {
		name string
		of   func(cpuShare) (float64, bool)
	}{
		{"engine", func(s cpuShare) (float64, bool) { return s.Engine, s.EngineOK }},
		{"Postgres", func(s cpuShare) (float64, bool) { return s.Postgres, s.PostgresOK }},
		{"Redis", func(s cpuShare) (float64, bool) { return s.Redis, s.RedisOK }},
	}
	for _, party := range parties {
		var xy plotter.XYs
		for _, pt := range points {
			if v, ok := party.of(pt.cpu); pt.cpuOK && ok {
				xy = append(xy, plotter.XY{X: float64(pt.size), Y: v})
			}
		}
		if len(xy) == 0 {
			continue
		}
		if err := addLine(p, party.name, xy, partyColors[party.name]); err != nil {
			return nil, err
		}
	}
	p.Legend.Top = true
	return p, nil
}

// addLine adds xy as a line with its points marked, named in the legend
// when name is set.
func addLine(p *plot.Plot, name string, xy plotter.XYs, c color.Color) error {
	line, dots, err := plotter.NewLinePoints(xy)
	if err != nil {
		return fmt.Errorf("scale plot: %w", err)
	}
	line.Color, dots.Color = c, c
	p.Add(line, dots)
	if name != "" {
		p.Legend.Add(name, line, dots)
	}
	return nil
}
