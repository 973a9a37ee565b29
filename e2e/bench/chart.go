package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
)

// writeChart draws latency-bound throughput (objects/s) per configuration as
// bars: controller-runtime (grey), kshard at 1, 2, 4 replicas (blue), with
// ideal linear scaling of the baseline as red ticks. Labels use a built-in
// 3×5 pixel font, so no font package is needed.
func writeChart(path string, r *results) error {
	const w, h, margin, scale = 640, 400, 40, 3
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	type bar struct {
		label string
		v     float64
		ideal float64
		c     color.RGBA
	}
	var base float64
	if c := r.Throughput.config(baselineName, 0); c != nil {
		base = c.ObjectsPerSec
	}
	bars := []bar{{"CR", base, 0, color.RGBA{128, 128, 128, 255}}}
	top := base
	for _, k := range r.Throughput.Configs {
		if k.System == baselineName {
			continue
		}
		label, c := "K", color.RGBA{40, 90, 200, 255}
		if k.System == adapterName {
			label, c = "A", color.RGBA{40, 150, 70, 255}
		}
		bars = append(bars, bar{fmt.Sprintf("%s%d", label, k.Replicas), k.ObjectsPerSec, base * float64(k.Replicas), c})
		top = max(top, k.ObjectsPerSec, base*float64(k.Replicas))
	}
	if top <= 0 {
		top = 1
	}
	black := color.RGBA{0, 0, 0, 255}
	plotTop, plotBottom := margin+20, h-margin-20
	fill(img, margin, plotBottom, w-margin, plotBottom+1, black) // x axis
	fill(img, margin, plotTop, margin+1, plotBottom, black)      // y axis
	slot := (w - 2*margin) / len(bars)
	for i, b := range bars {
		x0 := margin + i*slot + slot/4
		x1 := x0 + slot/2
		y := plotBottom - int(float64(plotBottom-plotTop)*b.v/top)
		fill(img, x0, y, x1, plotBottom, b.c)
		text(img, x0, y-8*scale/2-4, fmt.Sprintf("%.0f", b.v), scale, black)
		text(img, x0+slot/8, plotBottom+8, b.label, scale, black)
		if b.ideal > 0 {
			iy := plotBottom - int(float64(plotBottom-plotTop)*b.ideal/top)
			fill(img, x0-6, iy, x1+6, iy+2, color.RGBA{200, 30, 30, 255})
		}
	}
	text(img, margin, 10, "OBJ/S  LATENCY-BOUND", scale, black)
	fill(img, w-margin-200, 14, w-margin-176, 16, color.RGBA{200, 30, 30, 255})
	text(img, w-margin-170, 10, "IDEAL N X CR", scale, black)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func fill(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
}

// glyphs is a 3×5 font: each row is 3 bits, most significant on the left.
var glyphs = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7},
	'4': {5, 5, 7, 1, 1}, '5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 1, 1},
	'8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7}, '.': {0, 0, 0, 0, 2},
	'C': {7, 4, 4, 4, 7}, 'R': {6, 5, 6, 5, 5}, 'K': {5, 5, 6, 5, 5}, 'O': {7, 5, 5, 5, 7},
	'B': {6, 5, 6, 5, 6}, 'J': {1, 1, 1, 5, 7}, 'S': {7, 4, 7, 1, 7}, '/': {1, 1, 2, 4, 4},
	'L': {4, 4, 4, 4, 7}, 'A': {2, 5, 7, 5, 5}, 'T': {7, 2, 2, 2, 2}, 'E': {7, 4, 6, 4, 7},
	'N': {5, 7, 7, 7, 5}, 'Y': {5, 5, 2, 2, 2}, '-': {0, 0, 7, 0, 0}, 'U': {5, 5, 5, 5, 7},
	'D': {6, 5, 5, 5, 6}, 'I': {7, 2, 2, 2, 7}, 'X': {5, 5, 2, 5, 5},
}

func text(img *image.RGBA, x, y int, s string, scale int, c color.Color) {
	for _, ch := range s {
		g, ok := glyphs[ch]
		if ok {
			for row := range 5 {
				for col := range 3 {
					if g[row]&(4>>col) != 0 {
						fill(img, x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale, c)
					}
				}
			}
		}
		x += 4 * scale
	}
}
