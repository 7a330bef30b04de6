package liveview

import (
	"sort"
)

// Geometry of the live view's DAG drawing (SVG user units).
const (
	NodeWidth  = 176
	NodeHeight = 46
	uiGapX     = 56
	uiGapY     = 16
	uiMargin   = 20
	// uiOrderSweeps is how many barycenter sweeps order the nodes within
	// their layers; each costs O(edges log nodes).
	uiOrderSweeps = 4
)

// uiLayout places the nodes of a DAG in layers, left to right: a node's
// layer is the length of the longest dependency path leading to it, so every
// edge points rightwards. Within a layer nodes are ordered by the barycenter
// of their neighbours (a few sweeps in each direction), which keeps most
// edges short and uncrossed. deps[i] lists the indexes of node i's
// dependencies. A cycle cannot be stored (the store refuses one); should
// one appear anyway, its nodes go to the last layer rather than looping.
// It returns each node's layer and (x, y), and the drawing's size.
func uiLayout(n int, deps [][]int) (layer []int, x, y []int, width, height int) {
	layer = make([]int, n)
	x, y = make([]int, n), make([]int, n)
	if n == 0 {
		return layer, x, y, 2 * uiMargin, 2 * uiMargin
	}
	succ := make([][]int, n)
	indeg := make([]int, n)
	for i, ds := range deps {
		for _, d := range ds {
			succ[d] = append(succ[d], i)
			indeg[i]++
		}
	}
	// Kahn's algorithm in creation order: longest-path layering.
	queue := make([]int, 0, n)
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	done := make([]bool, n)
	for k := 0; k < len(queue); k++ {
		i := queue[k]
		done[i] = true
		for _, s := range succ[i] {
			if layer[i]+1 > layer[s] {
				layer[s] = layer[i] + 1
			}
			if indeg[s]--; indeg[s] == 0 {
				queue = append(queue, s)
			}
		}
	}
	maxLayer := 0
	for i := 0; i < n; i++ {
		if done[i] && layer[i] > maxLayer {
			maxLayer = layer[i]
		}
	}
	for i := 0; i < n; i++ {
		if !done[i] {
			layer[i] = maxLayer + 1
		}
	}
	for _, l := range layer {
		if l > maxLayer {
			maxLayer = l
		}
	}
	layers := make([][]int, maxLayer+1)
	for i := 0; i < n; i++ {
		layers[layer[i]] = append(layers[layer[i]], i)
	}
	pos := make([]float64, n)
	setPos := func() {
		for _, ids := range layers {
			for k, i := range ids {
				pos[i] = float64(k)
			}
		}
	}
	setPos()
	bary := make([]float64, n)
	reorder := func(ids []int, nb [][]int) {
		for _, i := range ids {
			if len(nb[i]) == 0 {
				bary[i] = pos[i]
				continue
			}
			sum := 0.0
			for _, j := range nb[i] {
				sum += pos[j]
			}
			bary[i] = sum / float64(len(nb[i]))
		}
		sort.SliceStable(ids, func(a, b int) bool { return bary[ids[a]] < bary[ids[b]] })
		for k, i := range ids {
			pos[i] = float64(k)
		}
	}
	for s := 0; s < uiOrderSweeps; s++ {
		for l := 1; l < len(layers); l++ {
			reorder(layers[l], deps)
		}
		for l := len(layers) - 2; l >= 0; l-- {
			reorder(layers[l], succ)
		}
	}
	tallest := 0
	for _, ids := range layers {
		if len(ids) > tallest {
			tallest = len(ids)
		}
	}
	height = 2*uiMargin + tallest*NodeHeight + (tallest-1)*uiGapY
	for l, ids := range layers {
		// Centre each layer vertically against the tallest one.
		span := len(ids)*NodeHeight + (len(ids)-1)*uiGapY
		top := uiMargin + (height-2*uiMargin-span)/2
		for k, i := range ids {
			x[i] = uiMargin + l*(NodeWidth+uiGapX)
			y[i] = top + k*(NodeHeight+uiGapY)
		}
	}
	width = 2*uiMargin + len(layers)*NodeWidth + (len(layers)-1)*uiGapX
	return layer, x, y, width, height
}
