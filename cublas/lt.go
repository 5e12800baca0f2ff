package cublas

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gocuda/gocuda/cublas/cublasraw"
	"github.com/gocuda/gocuda/cublaslt/cublasltraw"
	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cudalib"
)

// ltTypes are an element type's cuBLASLt types: its data type (also the scale type
// of alpha and beta) and its compute type.
type ltTypes struct {
	data    cudaraw.CudaDataType
	compute cublasraw.CublasComputeType
}

// Activation is the elementwise function of Matmul's epilogue.
type Activation int

// Activations.
const (
	Identity Activation = iota // no activation
	ReLU                       // max(x, 0)
	GELU                       // x·Φ(x), in cuBLASLt's tanh approximation
)

// Epilogue is what Matmul fuses into its product. The zero Epilogue fuses nothing.
//
// Forward (Backward false): D = Act(P + Bias), where P = alpha·op(A)·op(B) + beta·C
// and Bias (m elements, one per row of D; nil: none) is added to each column. Aux,
// when set, receives what the backward pass needs: for ReLU a bit mask of the
// positive elements (AuxLd bits a column, a multiple of 128, at least m: AuxLd·n/8
// bytes), for GELU the input of the activation (AuxLd elements of T a column, a
// multiple of 8, at least m).
//
// Backward: D = P ⊙ Act′(Aux), with Aux as the forward pass wrote it (Act ReLU or
// GELU), and Bias, when set, receives the bias gradient: the sums of D's rows
// (cuBLASLt's DRELU, DGELU, DRELU_BGRAD and DGELU_BGRAD epilogues).
type Epilogue struct {
	Act      Activation
	Bias     cuda.Memory
	Aux      cuda.Memory
	AuxLd    int
	Backward bool
}

// kind returns cuBLASLt's epilogue for e, and false for a combination it has none of.
func (e *Epilogue) kind() (cublasltraw.CublasLtEpilogue, bool) {
	bias, aux := e.Bias != nil, e.Aux != nil
	if e.Backward {
		switch {
		case !aux || e.Act == Identity:
			return 0, false
		case e.Act == ReLU && bias:
			return cublasltraw.CUBLASLT_EPILOGUE_DRELU_BGRAD, true
		case e.Act == ReLU:
			return cublasltraw.CUBLASLT_EPILOGUE_DRELU, true
		case e.Act == GELU && bias:
			return cublasltraw.CUBLASLT_EPILOGUE_DGELU_BGRAD, true
		case e.Act == GELU:
			return cublasltraw.CUBLASLT_EPILOGUE_DGELU, true
		}
		return 0, false
	}
	var k cublasltraw.CublasLtEpilogue
	switch e.Act {
	case Identity:
		if aux {
			return 0, false
		}
		k = cublasltraw.CUBLASLT_EPILOGUE_DEFAULT
	case ReLU:
		k = cublasltraw.CUBLASLT_EPILOGUE_RELU
		if aux {
			k = cublasltraw.CUBLASLT_EPILOGUE_RELU_AUX
		}
	case GELU:
		k = cublasltraw.CUBLASLT_EPILOGUE_GELU
		if aux {
			k = cublasltraw.CUBLASLT_EPILOGUE_GELU_AUX
		}
	default:
		return 0, false
	}
	if bias {
		k |= cublasltraw.CUBLASLT_EPILOGUE_BIAS
		if k == cublasltraw.CUBLASLT_EPILOGUE_DEFAULT|cublasltraw.CUBLASLT_EPILOGUE_BIAS {
			k = cublasltraw.CUBLASLT_EPILOGUE_BIAS
		}
	}
	return k, true
}

// Matmul computes D = act(alpha·op(A)·op(B) + beta·C + bias) on s in one cuBLASLt
// call, the epilogue e fused into the GEMM (see Epilogue), writing D over C (m×n);
// op(A) is m×k and op(B) k×n, column-major as in Gemm. Element types are float32
// (computed in FP32) and float64.
//
// The operands are checked as Gemm's are, and the epilogue's too (Bias m elements
// of T, Aux as Epilogue says), before any library call. Its cuBLASLt handle comes
// from a cache like Gemm's handles (MaxIdleHandles per context, besides the one each
// stream keeps) and has a workspace of the context's WorkspaceSize from the pool;
// each handle keeps the descriptors, layouts and heuristically chosen algorithm of
// the last shapes it ran (at most MaxMatmulPlans), so that a repeated shape makes no
// descriptor and asks no heuristic. Matmul is safe for concurrent use.
func Matmul[T Real](s *cuda.Stream, transA, transB Op, m, n, k int, alpha T, a cuda.Memory, lda int,
	b cuda.Memory, ldb int, beta T, c cuda.Memory, ldc int, e Epilogue) error {
	const op = "matmul"
	r, err := precisionOf[T](op)
	if err != nil {
		return err
	}
	types := r.lt
	ar, ac := dims(transA, m, k)
	br, bc := dims(transB, k, n)
	pa, okA := matrix[T](a, ar, ac, lda, 0, 1)
	pb, okB := matrix[T](b, br, bc, ldb, 0, 1)
	pc, okC := matrix[T](c, m, n, ldc, 0, 1)
	if !okA || !okB || !okC || !validTrans(transA, transB) {
		return gemmError[T, T](op, transA, transB, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1)
	}
	epi, ok := e.kind()
	if !ok {
		return fmt.Errorf("cublas: %s: %w: no cuBLASLt epilogue for activation %d, bias %v, aux %v, backward %v",
			op, cuda.ErrInvalidArgument, int(e.Act), e.Bias != nil, e.Aux != nil, e.Backward)
	}
	var pBias, pAux unsafe.Pointer
	uses := make([]cuda.Use, 0, 6)
	uses = append(uses, cuda.Reads(a), cuda.Reads(b), cuda.Writes(c))
	if e.Bias != nil {
		p, err := vector[T](op, "bias", e.Bias, m)
		if err != nil {
			return err
		}
		pBias = unsafe.Pointer(p)
		if e.Backward {
			uses = append(uses, cuda.Writes(e.Bias))
		} else {
			uses = append(uses, cuda.Reads(e.Bias))
		}
	}
	if e.Aux != nil {
		if pAux, err = auxOperand[T](op, &e, m, n); err != nil {
			return err
		}
		if e.Backward {
			uses = append(uses, cuda.Reads(e.Aux))
		} else {
			uses = append(uses, cuda.Writes(e.Aux))
		}
	}
	key := planKey{types.data, transA, transB, int32(m), int32(n), int32(k), int32(lda), int32(ldb), int32(ldc), epi, int32(e.AuxLd)}
	ctx := s.Context()
	if ctx == nil {
		return opError(op, cuda.CheckEnqueue(s))
	}
	h, err := ltTake(ctx, s, uses)
	if err != nil {
		return opError(op, err)
	}
	defer ltHandles.Put(s, h)
	st := &h.State
	if st.ws != nil {
		uses = append(uses, cuda.Writes(st.ws))
	}
	err = cuda.Enqueue(s, func(cc cudaraw.CUcontext, stream cudaraw.CUstream) error {
		p, err := st.plan(cc, h.Raw, key, types)
		if err != nil {
			return err
		}
		if err := p.setPointers(epi, pBias, pAux); err != nil {
			return err
		}
		pal, pbe := setScalars(st.scal, alpha, beta)
		var ws unsafe.Pointer
		if st.ws != nil {
			w, err := cuda.DevicePtr[byte](st.ws)
			if err != nil {
				return err
			}
			ws = unsafe.Pointer(w)
		}
		return cublasltraw.MatmulIn(cc, h.Raw, p.desc.Handle(), unsafe.Pointer(pal), unsafe.Pointer(pa), p.a.Handle(), unsafe.Pointer(pb), p.b.Handle(),
			unsafe.Pointer(pbe), unsafe.Pointer(pc), p.c.Handle(), unsafe.Pointer(pc), p.c.Handle(), &p.algo, ws, uint64(st.wsSize()), stream)
	}, uses...)
	if err != nil {
		return opError(op, err)
	}
	return nil
}

// auxOperand checks e.Aux for an m×n D and returns its address.
func auxOperand[T any](op string, e *Epilogue, m, n int) (unsafe.Pointer, error) {
	ld := e.AuxLd
	var need int
	switch {
	case e.Act == ReLU && ld >= max(m, 1) && ld%128 == 0 && ld <= maxInt32:
		need = ld / 8 * n
	case e.Act == GELU && ld >= max(m, 1) && ld%8 == 0 && ld <= maxInt32:
		need = ld * n * int(unsafe.Sizeof(*new(T)))
	default:
		return nil, fmt.Errorf("cublas: %s: %w: aux leading dimension %d for %d rows (ReLU: a multiple of 128, GELU: of 8)", op, cuda.ErrInvalidArgument, ld, m)
	}
	// GELU's aux holds pre-activation values of D's type; ReLU's is a bit mask.
	var p unsafe.Pointer
	if e.Act == GELU {
		q, err := cuda.DevicePtr[T](e.Aux)
		if err != nil {
			return nil, fmt.Errorf("cublas: %s: aux: %w", op, err)
		}
		p = unsafe.Pointer(q)
	} else {
		q, err := cuda.DevicePtr[byte](e.Aux)
		if err != nil {
			return nil, fmt.Errorf("cublas: %s: aux: %w", op, err)
		}
		p = unsafe.Pointer(q)
	}
	if size(e.Aux) < need {
		return nil, fmt.Errorf("cublas: %s: %w: aux needs %d bytes, the memory holds %d", op, cuda.ErrInvalidArgument, need, size(e.Aux))
	}
	return p, nil
}

// MaxMatmulPlans is how many shapes' descriptors and algorithms each cuBLASLt handle
// keeps for Matmul.
const MaxMatmulPlans = 32

// planKey is a Matmul's shape: what its descriptors and algorithm depend on.
type planKey struct {
	data     cudaraw.CudaDataType
	ta, tb   Op
	m, n, k  int32
	lda, ldb int32
	ldc      int32
	epi      cublasltraw.CublasLtEpilogue
	auxLd    int32
}

// plan is one shape's descriptors and the algorithm cuBLASLt's heuristic chose.
type plan struct {
	desc    *cublasltraw.OwnedMatmulDesc
	a, b, c *cublasltraw.OwnedMatrixLayout
	algo    cublasltraw.CublasLtMatmulAlgo
}

// close releases p's descriptors (host objects: no queued work refers to them).
func (p *plan) close() {
	if p.desc != nil {
		_ = p.desc.Close()
	}
	for _, l := range []*cublasltraw.OwnedMatrixLayout{p.a, p.b, p.c} {
		if l != nil {
			_ = l.Close()
		}
	}
}

// setPointers sets the epilogue's pointers of this call in p's descriptor.
func (p *plan) setPointers(epi cublasltraw.CublasLtEpilogue, bias, aux unsafe.Pointer) error {
	d := p.desc.Handle()
	if bias != nil {
		if err := cublasltraw.MatmulDescSetAttribute(d, cublasltraw.CUBLASLT_MATMUL_DESC_BIAS_POINTER, unsafe.Pointer(&bias), 8); err != nil {
			return err
		}
	}
	if aux != nil {
		if err := cublasltraw.MatmulDescSetAttribute(d, cublasltraw.CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, unsafe.Pointer(&aux), 8); err != nil {
			return err
		}
	}
	return nil
}

// ltState is a cuBLASLt handle's state: its workspace, the preference that tells
// the heuristic its size, its room for scalars and its plans by shape.
type ltState struct {
	ws    *cuda.DeviceBuffer
	size  int
	ver   uint64
	pref  *cublasltraw.OwnedMatmulPreference
	scal  *scalars
	plans map[planKey]*plan
}

func (st *ltState) wsSize() int {
	if st.ws == nil {
		return 0
	}
	return st.ws.Size()
}

// plan returns the plan of key, made (descriptors, layouts, the heuristic's first
// algorithm) when the handle has none.
func (st *ltState) plan(c cudaraw.CUcontext, h cublasltraw.CublasLtHandle, key planKey, t *ltTypes) (*plan, error) {
	if p, ok := st.plans[key]; ok {
		return p, nil
	}
	if len(st.plans) >= MaxMatmulPlans {
		st.dropPlans()
	}
	p, err := newPlan(c, h, key, t, st.pref)
	if err != nil {
		return nil, err
	}
	if st.plans == nil {
		st.plans = map[planKey]*plan{}
	}
	st.plans[key] = p
	return p, nil
}

func (st *ltState) dropPlans() {
	for k, p := range st.plans {
		p.close()
		delete(st.plans, k)
	}
}

func newPlan(c cudaraw.CUcontext, h cublasltraw.CublasLtHandle, key planKey, t *ltTypes, pref *cublasltraw.OwnedMatmulPreference) (p *plan, err error) {
	p = &plan{}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	var d cublasltraw.CublasLtMatmulDesc
	if err := cublasltraw.MatmulDescCreate(&d, t.compute, t.data); err != nil {
		return nil, err
	}
	p.desc = cublasltraw.OwnMatmulDesc(d)
	ta, tb, epi := key.ta, key.tb, key.epi
	attrs := []struct {
		a cublasltraw.CublasLtMatmulDescAttributes
		p unsafe.Pointer
		n uint64
	}{
		{cublasltraw.CUBLASLT_MATMUL_DESC_TRANSA, unsafe.Pointer(&ta), 4},
		{cublasltraw.CUBLASLT_MATMUL_DESC_TRANSB, unsafe.Pointer(&tb), 4},
		{cublasltraw.CUBLASLT_MATMUL_DESC_EPILOGUE, unsafe.Pointer(&epi), 4},
	}
	auxLd := int64(key.auxLd)
	if key.auxLd != 0 {
		attrs = append(attrs, struct {
			a cublasltraw.CublasLtMatmulDescAttributes
			p unsafe.Pointer
			n uint64
		}{cublasltraw.CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, unsafe.Pointer(&auxLd), 8})
	}
	for _, at := range attrs {
		if err := cublasltraw.MatmulDescSetAttribute(d, at.a, at.p, at.n); err != nil {
			return nil, err
		}
	}
	ar, ac := dims(ta, int(key.m), int(key.k))
	br, bc := dims(tb, int(key.k), int(key.n))
	for _, l := range []struct {
		dst        **cublasltraw.OwnedMatrixLayout
		rows, cols int
		ld         int32
	}{{&p.a, ar, ac, key.lda}, {&p.b, br, bc, key.ldb}, {&p.c, int(key.m), int(key.n), key.ldc}} {
		var lr cublasltraw.CublasLtMatrixLayout
		if err := cublasltraw.MatrixLayoutCreate(&lr, t.data, cudaraw.Cuuint64(l.rows), cudaraw.Cuuint64(l.cols), int64(l.ld)); err != nil {
			return nil, err
		}
		*l.dst = cublasltraw.OwnMatrixLayout(lr)
	}
	var res cublasltraw.CublasLtMatmulHeuristicResult
	var got int32
	if err := cublasltraw.MatmulAlgoGetHeuristicIn(c, h, d, p.a.Handle(), p.b.Handle(), p.c.Handle(), p.c.Handle(), pref.Handle(), 1, &res, &got); err != nil {
		return nil, err
	}
	if got == 0 {
		return nil, fmt.Errorf("%w: cuBLASLt has no algorithm for this shape and epilogue", cublasraw.ErrNotSupported)
	}
	p.algo = res.Algo
	return p, nil
}

type ltHandle = cudalib.Handle[cudalib.NoKey, cublasltraw.CublasLtHandle, *cublasltraw.OwnedHandle, ltState]

// ltHandles are the idle cuBLASLt handles, per context. cuBLASLt takes the stream at
// each call, so a handle is never bound to one; the hand-off orders its workspace.
var ltHandles = cudalib.NewPool[cublasltraw.CublasLtHandle, *cublasltraw.OwnedHandle, ltState](MaxIdleHandles, cublasltraw.Create, cublasltraw.OwnHandle, false)

// ltTake returns a cuBLASLt handle of ctx for s, with its preference and a
// workspace of the context's WorkspaceSize (the setting cuBLAS's handles share).
func ltTake(ctx *cuda.Context, s *cuda.Stream, uses []cuda.Use) (*ltHandle, error) {
	h, err := ltHandles.Take(ctx, s, cudalib.NoKey{}, uses...)
	if err != nil {
		return nil, err
	}
	st := &h.State
	if st.scal != nil && st.ver == workspaceSizes.Version() && (st.ws != nil || st.size == 0) {
		return h, nil
	}
	if err := ltPrepare(ctx, s, st); err != nil {
		ltHandles.Put(s, h)
		return nil, err
	}
	return h, nil
}

// ltPrepare gives st its scalars and a workspace and preference of the context's
// size; plans chosen for another size are dropped.
func ltPrepare(ctx *cuda.Context, s *cuda.Stream, st *ltState) error {
	if st.scal == nil {
		st.scal = new(scalars)
	}
	size := WorkspaceSize(ctx)
	st.ver = workspaceSizes.Version()
	if st.pref != nil && st.size == size && (st.ws != nil || size == 0) {
		return nil
	}
	st.dropPlans()
	if st.ws != nil {
		st.ws.Close() // ordered after its last use by the hand-off
		st.ws = nil
	}
	if st.pref != nil {
		_ = st.pref.Close()
		st.pref = nil
	}
	st.size = size
	if size > 0 {
		var err error
		if st.ws, err = ctx.Alloc(s, size); err != nil {
			return fmt.Errorf("allocating the workspace: %w", err)
		}
	}
	pref, err := cublasltraw.NewOwnedMatmulPreference()
	if err != nil {
		return err
	}
	bytes := uint64(size)
	if err := cublasltraw.MatmulPreferenceSetAttribute(pref.Handle(), cublasltraw.CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, unsafe.Pointer(&bytes), 8); err != nil {
		return errors.Join(err, pref.Close())
	}
	st.pref = pref
	return nil
}
