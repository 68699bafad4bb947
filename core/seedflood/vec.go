package seedflood

// axpy adds a·x to y (len(x) >= len(y)). Unrolled by four over re-sliced
// windows so the compiler drops bounds checks; this loop is most of the
// simulation's time.
func axpy(a float32, x, y []float32) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		yy := y[i : i+4 : i+4]
		xx := x[i : i+4 : i+4]
		yy[0] += a * xx[0]
		yy[1] += a * xx[1]
		yy[2] += a * xx[2]
		yy[3] += a * xx[3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

// dot is Σ x_i·y_i over len(y) elements, with four partial sums.
func dot(x, y []float32) float32 {
	x = x[:len(y)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(y); i += 4 {
		yy := y[i : i+4 : i+4]
		xx := x[i : i+4 : i+4]
		s0 += xx[0] * yy[0]
		s1 += xx[1] * yy[1]
		s2 += xx[2] * yy[2]
		s3 += xx[3] * yy[3]
	}
	for ; i < len(y); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}
