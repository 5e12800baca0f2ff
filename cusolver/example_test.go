package cusolver_test

import (
	"errors"
	"fmt"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cusolver"
)

// Solve a symmetric positive definite system A·x = b by Cholesky, then a general
// one by LU. (It needs a GPU and cuSOLVER, so it is compiled but not run by go test.)
func Example() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, err := ctx.NewStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	// Column-major 2×2 matrices.
	spd, err := cuda.AllocFrom(s, []float64{4, 2, 2, 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer spd.Close()
	b, err := cuda.AllocFrom(s, []float64{2, 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	if err := cusolver.Potrf[float64](s, cusolver.Lower, 2, spd, 2); err != nil {
		fmt.Println(err) // an *InfoError matching ErrNotPositiveDefinite, for one
		return
	}
	if err := cusolver.Potrs[float64](s, cusolver.Lower, 2, 1, spd, 2, b, 2); err != nil {
		fmt.Println(err)
		return
	}
	x := make([]float64, 2)
	if err := cuda.CopyFromDevice(x, b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(x) // [0.5 0]

	gen, err := cuda.AllocFrom(s, []float64{0, 1, 2, 0}) // needs a row swap
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := cuda.AllocFrom(s, []float64{4, 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	defer gen.Close()
	ipiv, err := cuda.AllocFor[int32](s, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ipiv.Close()
	if err := cusolver.Getrf[float64](s, 2, 2, gen, 2, ipiv); err != nil {
		fmt.Println(err)
		return
	}
	if err := cusolver.Getrs[float64](s, cusolver.NoTrans, 2, 1, gen, 2, ipiv, c, 2); err != nil {
		fmt.Println(err)
		return
	}
	if err := cuda.CopyFromDevice(x, c); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(x) // [3 2]
}

// Queue a factorization and its solve without waiting, then check both infos.
// (Compiled, not run: it needs a GPU.)
func Example_async() {
	ctx, err := cuda.Device(0).Context()
	if err != nil {
		fmt.Println("no GPU:", err)
		return
	}
	s, _ := ctx.NewStream()
	defer s.Close()
	a, _ := cuda.AllocFrom(s, []float32{4})
	b, _ := cuda.AllocFrom(s, []float32{8})
	defer a.Close()
	defer b.Close()
	f, err := cusolver.PotrfAsync[float32](s, cusolver.Upper, 1, a, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	x, err := cusolver.PotrsAsync[float32](s, cusolver.Upper, 1, 1, a, 1, b, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()
	fmt.Println(errors.Join(f.Check(), x.Check())) // <nil>: waits for both
}

// Infos are typed errors that match what they mean.
func Example_infoError() {
	var err error = &cusolver.InfoError{Op: "getrf", Info: 3}
	fmt.Println(err)
	fmt.Println(errors.Is(err, cusolver.ErrSingular))
	// Output:
	// cusolver: getrf: U(3,3) is exactly zero: the matrix is singular (info 3)
	// true
}
