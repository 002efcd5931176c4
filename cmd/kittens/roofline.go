package main

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"time"

	// gonum's plot draws the status page's picture (kittens report -status):
	// a pure-Go (no cgo) plotting library with log axes, legends and an SVG
	// writer, which a hand-written SVG would have to redo. Only this command
	// imports it, so the library's packages do not depend on it.
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gokittens/kittens/bench"
)

// rooflineFile is the picture's name beside STATUS.md.
const rooflineFile = "roofline.svg"

// writeRoofline draws each measured case of rep as its rate (GB/s) against
// the bytes it moves, both on log scales, one glyph and colour a family,
// under the device's roofline for one launch: the copy ceiling, and for
// small cases the bytes over the fastest launch floor (no launch takes
// less). The same-size copies the runs timed are drawn as a dashed line.
// The x axis is bytes rather than arithmetic intensity because the cases
// are memory-bound and count no FLOPs; a case that counts them is drawn by
// its bytes too, since no compute ceiling is measured. It writes SVG.
func writeRoofline(w io.Writer, rep *bench.Report) error {
	p, err := rooflinePlot(rep)
	if err != nil {
		return err
	}
	wt, err := p.WriterTo(10*vg.Inch, 6.5*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// rooflinePlot is writeRoofline's picture. Both axes hold the log10 of
// the figures, on linear scales with ticks labelled in the figures' own
// terms: gonum's log scale would centre the axis labels at the linear
// midpoint and shrink the plot to make room for them.
func rooflinePlot(rep *bench.Report) (*plot.Plot, error) {
	byFamily := map[string]plotter.XYs{}
	var families []string
	var copies plotter.XYs
	lo, hi := math.Inf(1), 0.0    // bytes
	low, high := math.Inf(1), 0.0 // GB/s
	for _, e := range rep.Entries {
		if e.Err != "" || e.Bytes <= 0 || e.Result.GBs <= 0 {
			continue
		}
		if _, ok := byFamily[e.Family]; !ok {
			families = append(families, e.Family)
		}
		byFamily[e.Family] = append(byFamily[e.Family], logXY(float64(e.Bytes), e.Result.GBs))
		lo, hi = min(lo, float64(e.Bytes)), max(hi, float64(e.Bytes))
		low, high = min(low, e.Result.GBs), max(high, e.Result.GBs, e.SameCopyGBs)
		if e.SameCopyGBs > 0 {
			copies = append(copies, logXY(float64(bench.CopyBytes(e.Bytes)), e.SameCopyGBs))
		}
	}
	if len(families) == 0 {
		return nil, fmt.Errorf("no measured case to draw")
	}
	ceiling := rep.Env.CopyGBs
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %s: each case's rate against the roofline", rep.Env.Device, rep.Env.Date.Format(time.DateOnly))
	p.X.Label.Text = "bytes moved by one launch (each input read once, each output written once)"
	p.Y.Label.Text = "GB/s"
	p.X.Tick.Marker, p.Y.Tick.Marker = logTicks(byteLabel), logTicks(func(v float64) string { return fmt.Sprint(v) })
	p.X.Min, p.X.Max = math.Log10(lo/2), math.Log10(hi*2)
	p.Y.Min, p.Y.Max = math.Log10(low/2), math.Log10(max(high, ceiling)*1.5)
	p.Legend.Top, p.Legend.Left = false, false // the bottom right, under the copy ceiling, is empty
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), vg.Points(8)
	p.Add(plotter.NewGrid())

	// The roofline: min(copy ceiling, bytes / fastest floor).
	if ceiling > 0 {
		left, right := math.Pow(10, p.X.Min), math.Pow(10, p.X.Max)
		roof := plotter.XYs{logXY(left, ceiling), logXY(right, ceiling)}
		label := fmt.Sprintf("roofline: copy ceiling %.0f GB/s", ceiling)
		if floor := rep.Env.LowestFloor(); floor > 0 {
			roof = plotter.XYs{logXY(left, left/(floor*1e3)), logXY(ceiling*floor*1e3, ceiling), logXY(right, ceiling)}
			label += fmt.Sprintf(", bytes / %.2f µs launch floor", floor)
		}
		l, err := plotter.NewLine(roof)
		if err != nil {
			return nil, err
		}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(label, l)
	}
	if len(copies) > 0 {
		slices.SortFunc(copies, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		copies = slices.CompactFunc(copies, func(a, b plotter.XY) bool { return a.X == b.X })
		l, pts, err := plotter.NewLinePoints(copies)
		if err != nil {
			return nil, err
		}
		gray := color.Gray{Y: 128}
		l.Color, l.Dashes = gray, []vg.Length{vg.Points(4), vg.Points(3)}
		pts.Color, pts.Radius, pts.Shape = gray, vg.Points(1.5), draw.CircleGlyph{}
		p.Add(l, pts)
		p.Legend.Add("a device copy of the case's size", l, pts)
	}
	for i, f := range families {
		s, err := plotter.NewScatter(byFamily[f])
		if err != nil {
			return nil, err
		}
		s.Color, s.Shape, s.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(3)
		p.Add(s)
		p.Legend.Add(f, s)
	}
	return p, nil
}

// logXY is the point (x, y) on the picture's log10 axes.
func logXY(x, y float64) plotter.XY { return plotter.XY{X: math.Log10(x), Y: math.Log10(y)} }

// logTicks marks an axis of log10 values at each power of ten, labelled by
// label of the value itself, and at its multiples 2-9 unlabelled.
func logTicks(label func(float64) string) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var out []plot.Tick
		for k := math.Floor(lo); k <= hi; k++ {
			for m := 1.0; m < 10; m++ {
				v := k + math.Log10(m)
				if v < lo || v > hi {
					continue
				}
				t := plot.Tick{Value: v}
				if m == 1 {
					t.Label = label(math.Pow(10, k))
				}
				out = append(out, t)
			}
		}
		return out
	})
}

// byteLabel writes a power of ten of bytes with its unit: 10 kB, 1 GB.
func byteLabel(v float64) string {
	for _, u := range []struct {
		size float64
		name string
	}{{1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}} {
		if v >= u.size {
			return fmt.Sprintf("%g %s", v/u.size, u.name)
		}
	}
	return fmt.Sprintf("%g B", v)
}
