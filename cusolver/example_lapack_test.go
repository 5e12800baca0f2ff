package cusolver_test

import (
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cusolver"
)

// QR of a 3×2 matrix: Geqrf leaves R in the upper triangle and the reflectors
// below it; Orgqr forms the thin Q. (It needs a GPU and cuSOLVER, so it is compiled
// but not run by go test.)
func ExampleGeqrf() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []float64{3, 4, 0, 0, 0, 2}) // column-major: columns (3,4,0) and (0,0,2)
	tau, _ := cuda.AllocFor[float64](s, 2)
	defer a.Close()
	defer tau.Close()
	if err := cusolver.Geqrf[float64](s, 3, 2, a, 3, tau); err != nil {
		fmt.Println(err)
		return
	}
	f := make([]float64, 6)
	_ = cuda.CopyFromDevice(f, a)
	fmt.Printf("|R| diagonal: %.0f %.0f\n", abs(f[0]), abs(f[4])) // 5 2
	if err := cusolver.Orgqr[float64](s, 3, 2, 2, a, 3, tau); err != nil {
		fmt.Println(err)
		return
	}
	_ = cuda.CopyFromDevice(f, a)
	fmt.Printf("Q's first column: ±(%.1f %.1f %.1f)\n", abs(f[0]), abs(f[1]), abs(f[2])) // ±(0.6 0.8 0.0)
}

func abs(x float64) float64 { return max(x, -x) }

// Apply Qᴴ of a QR factorization to a vector without forming Q. (Compiled, not run:
// it needs a GPU.)
func ExampleOrmqr() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []complex64{3, 4i}) // a 2×1 matrix
	tau, _ := cuda.AllocFor[complex64](s, 1)
	c, _ := cuda.AllocFrom(s, []complex64{3, 4i}) // the same column: Qᴴ·c = (±5, 0)
	defer a.Close()
	defer tau.Close()
	defer c.Close()
	if err := cusolver.Geqrf[complex64](s, 2, 1, a, 2, tau); err != nil {
		fmt.Println(err)
		return
	}
	if err := cusolver.Ormqr[complex64](s, cusolver.Left, cusolver.ConjTrans, 2, 1, 1, a, 2, tau, c, 2); err != nil {
		fmt.Println(err)
		return
	}
	v := make([]complex64, 2)
	_ = cuda.CopyFromDevice(v, c)
	fmt.Printf("|Qᴴc| = %.0f, %.0f\n", abs(float64(real(v[0]))), abs(float64(real(v[1])))) // 5, 0
}

// Fit a line y = p + q·x to three points by least squares. (Compiled, not run: it
// needs a GPU.)
func ExampleGels() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	// x = 0, 1, 2; y = 1, 3, 5: columns (1,1,1) and (0,1,2).
	a, _ := cuda.AllocFrom(s, []float64{1, 1, 1, 0, 1, 2})
	b, _ := cuda.AllocFrom(s, []float64{1, 3, 5})
	defer a.Close()
	defer b.Close()
	if err := cusolver.Gels[float64](s, 3, 2, 1, a, 3, b, 3); err != nil {
		fmt.Println(err)
		return
	}
	x := make([]float64, 3)
	_ = cuda.CopyFromDevice(x, b)
	fmt.Printf("p=%.3f q=%.3f\n", x[0], x[1]) // p=1.000 q=2.000
}

// Invert a 2×2 matrix. (Compiled, not run: it needs a GPU.)
func ExampleInverse() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []float32{4, 2, 7, 6}) // [[4 7] [2 6]]
	inv, _ := cuda.AllocFor[float32](s, 4)
	defer a.Close()
	defer inv.Close()
	if err := cusolver.Inverse[float32](s, 2, a, 2, inv); err != nil {
		fmt.Println(err) // an *InfoError matching ErrSingular, for one
		return
	}
	x := make([]float32, 4)
	_ = cuda.CopyFromDevice(x, inv)
	fmt.Printf("%.1f\n", x) // [0.6 -0.2 -0.7 0.4]
}

// Singular values and vectors of a 3×2 matrix. (Compiled, not run: it needs a GPU.)
func ExampleGesvd() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []float64{3, 0, 0, 0, 4, 0}) // diag(3, 4) over a zero row
	sv, _ := cuda.AllocFor[float64](s, 2)
	u, _ := cuda.AllocFor[float64](s, 3*2)
	vt, _ := cuda.AllocFor[float64](s, 2*2)
	for _, b := range []*cuda.DeviceBuffer{a, sv, u, vt} {
		defer b.Close()
	}
	if err := cusolver.Gesvd[float64](s, cusolver.SVDThin, cusolver.SVDThin, 3, 2, a, 3, sv, u, 3, vt, 2); err != nil {
		fmt.Println(err)
		return
	}
	v := make([]float64, 2)
	_ = cuda.CopyFromDevice(v, sv)
	fmt.Println(v) // [4 3]: descending
}

// Singular values of many small matrices at once by the Jacobi method: here two
// 2×2 diagonal ones. (Compiled, not run: it needs a GPU.)
func ExampleGesvdjBatched() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []complex128{1, 0, 0, -2, 5i, 0, 0, 3}) // diag(1, -2), diag(5i, 3)
	sv, _ := cuda.AllocFor[float64](s, 2*2)                           // the real type of complex128
	defer a.Close()
	defer sv.Close()
	err = cusolver.GesvdjBatched[complex128](s, cusolver.NoVectors, 2, 2, a, 2, sv, nil, 0, nil, 0, 2,
		&cusolver.Jacobi{Tolerance: 1e-12, MaxSweeps: 20})
	if err != nil {
		fmt.Println(err) // an *InfoError per matrix that did not converge, with its index
		return
	}
	v := make([]float64, 4)
	_ = cuda.CopyFromDevice(v, sv)
	fmt.Println(v) // [2 1 5 3]
}

// Eigenvalues and eigenvectors of a symmetric 2×2 matrix. (Compiled, not run: it
// needs a GPU.)
func ExampleSyevd() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []float64{2, 1, 1, 2})
	w, _ := cuda.AllocFor[float64](s, 2)
	defer a.Close()
	defer w.Close()
	if err := cusolver.Syevd[float64](s, cusolver.Vectors, cusolver.Lower, 2, a, 2, w); err != nil {
		fmt.Println(err)
		return
	}
	v := make([]float64, 2)
	_ = cuda.CopyFromDevice(v, w)
	fmt.Printf("%.0f\n", v) // [1 3]: ascending; A holds the eigenvectors
}

// Eigenvalues of many small Hermitian matrices at once by the Jacobi method.
// (Compiled, not run: it needs a GPU.)
func ExampleSyevjBatched() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	// [[2 -i] [i 2]] (eigenvalues 1, 3) and diag(7, 5), lower triangles read.
	a, _ := cuda.AllocFrom(s, []complex64{2, 1i, 0, 2, 7, 0, 0, 5})
	w, _ := cuda.AllocFor[float32](s, 2*2)
	defer a.Close()
	defer w.Close()
	if err := cusolver.SyevjBatched[complex64](s, cusolver.NoVectors, cusolver.Lower, 2, a, 2, w, 2, nil); err != nil {
		fmt.Println(err)
		return
	}
	v := make([]float32, 4)
	_ = cuda.CopyFromDevice(v, w)
	fmt.Printf("%.0f\n", v) // [1 3 5 7]
}
