/* _loader_batch.c - tiergnn._loader.Batch: one batch lent by the loader, its arrays as NumPy
 * arrays (or torch tensors) over the loader's slot where the types allow, copies where PyG's
 * conventions need another type (y, adjs, the blocks' indices). */
#include "_loader.h"

#include <structmember.h>

/* A NumPy array over the batch's memory; the Batch is its base, so it keeps the slot held. */
static PyObject *view(tgpy_batch_t *self, int nd, npy_intp *dims, int type, void *data)
{
    PyObject *arr = PyArray_SimpleNewFromData(nd, dims, type, data);
    if (!arr) return NULL;
    Py_INCREF(self);
    if (PyArray_SetBaseObject((PyArrayObject *)arr, (PyObject *)self) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* x: float32 [num_input_nodes, feat_dim], the slot's X itself */
static PyObject *batch_x(tgpy_batch_t *self, void *closure)
{
    npy_intp dims[2] = {self->b->batch.num_nodes, self->b->dim};
    return tgpy_loader_out(self->loader, view(self, 2, dims, NPY_FLOAT32, self->b->X));
}

/* n_id: int64 [num_input_nodes], the global ids (uint64 in C, every id < 2^63), seeds first */
static PyObject *batch_n_id(tgpy_batch_t *self, void *closure)
{
    npy_intp dims[1] = {self->b->batch.num_nodes};
    return tgpy_loader_out(self->loader, view(self, 1, dims, NPY_INT64, self->b->batch.nodes));
}

/* y: int64 [batch_size] (or [batch_size, label_width] multi-label): the loss functions of torch
 * take int64 class indices, so the int32 labels are copied once */
static PyObject *batch_y(tgpy_batch_t *self, void *closure)
{
    if (!self->y) {
        const tg_loader_batch_t *b = self->b;
        npy_intp dims[2] = {b->batch.num_seeds, b->label_width};
        PyObject *arr = PyArray_SimpleNew(b->label_width == 1 ? 1 : 2, dims, NPY_INT64);
        if (!arr) return NULL;
        int64_t *y = PyArray_DATA((PyArrayObject *)arr);
        for (npy_intp i = 0; i < dims[0] * dims[1]; i++)
            y[i] = b->y[i];
        self->y = tgpy_loader_out(self->loader, arr);
        if (!self->y) return NULL;
    }
    Py_INCREF(self->y);
    return self->y;
}

/* PyG's edge_index of block l: int64 [2, E], row 0 the source, row 1 the target (local) */
static PyObject *edge_index(const tg_block_t *blk)
{
    npy_intp dims[2] = {2, (npy_intp)blk->num_edges};
    PyObject *arr = PyArray_SimpleNew(2, dims, NPY_INT64);
    if (!arr) return NULL;
    int64_t *src = PyArray_DATA((PyArrayObject *)arr), *dst = src + blk->num_edges;
    for (uint32_t i = 0; i < blk->num_dst; i++)
        for (uint64_t e = blk->indptr[i]; e < blk->indptr[i + 1]; e++) {
            src[e] = blk->indices[e];
            dst[e] = i;
        }
    return arr;
}

static PyObject *make_adjs(tgpy_batch_t *self)
{
    PyObject *Adj = tgpy_named_tuple("Adj");
    const tg_batch_t *bt = &self->b->batch;
    PyObject *list = Adj ? PyList_New(bt->num_layers) : NULL;
    for (int l = 0; list && l < bt->num_layers; l++) {
        const tg_block_t *blk = &bt->blocks[l];
        PyObject *ei = tgpy_loader_out(self->loader, edge_index(blk));
        PyObject *adj =
            ei ? PyObject_CallFunction(Adj, "NO(II)", ei, Py_None, blk->num_src, blk->num_dst)
               : NULL;
        if (!adj)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, l, adj);
    }
    return list;
}

/* adjs: per layer, input layer (outermost hop) first, as NeighborSampler yields them */
static PyObject *batch_adjs(tgpy_batch_t *self, void *closure)
{
    if (!self->adjs && !(self->adjs = make_adjs(self))) return NULL;
    Py_INCREF(self->adjs);
    return self->adjs;
}

/* indices as int64 (torch indexes with int64); indptr and weights over the slot */
static PyObject *make_block(tgpy_batch_t *self, PyObject *Block, tg_block_t *blk)
{
    npy_intp nptr = (npy_intp)blk->num_dst + 1, ne = (npy_intp)blk->num_edges;
    PyObject *indptr = tgpy_loader_out(self->loader, view(self, 1, &nptr, NPY_INT64, blk->indptr));
    PyObject *ind = PyArray_SimpleNew(1, &ne, NPY_INT64), *w = Py_None;
    if (ind)
        for (npy_intp e = 0; e < ne; e++)
            ((int64_t *)PyArray_DATA((PyArrayObject *)ind))[e] = blk->indices[e];
    ind = tgpy_loader_out(self->loader, ind);
    Py_INCREF(Py_None);
    if (blk->weights) {
        Py_DECREF(Py_None);
        w = tgpy_loader_out(self->loader, view(self, 1, &ne, NPY_FLOAT32, blk->weights));
    }
    if (!indptr || !ind || !w) {
        Py_XDECREF(indptr);
        Py_XDECREF(ind);
        Py_XDECREF(w);
        return NULL;
    }
    return PyObject_CallFunction(Block, "NNIIN", indptr, ind, blk->num_src, blk->num_dst, w);
}

/* blocks: per layer, input layer first, made at each access (they refer to the batch) */
static PyObject *batch_blocks(tgpy_batch_t *self, void *closure)
{
    PyObject *Block = tgpy_named_tuple("Block");
    const tg_batch_t *bt = &self->b->batch;
    PyObject *list = Block ? PyList_New(bt->num_layers) : NULL;
    for (int l = 0; list && l < bt->num_layers; l++) {
        PyObject *blk = make_block(self, Block, &bt->blocks[l]);
        if (!blk)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, l, blk);
    }
    return list;
}

static PyObject *batch_size(tgpy_batch_t *self, void *closure)
{
    return PyLong_FromUnsignedLong(self->b->batch.num_seeds);
}

static PyObject *batch_num_nodes(tgpy_batch_t *self, void *closure)
{
    return PyLong_FromUnsignedLong(self->b->batch.num_nodes);
}

static PyObject *batch_id(tgpy_batch_t *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->b->batch.id);
}

static PyObject *batch_epoch(tgpy_batch_t *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->b->epoch);
}

static PyObject *batch_index(tgpy_batch_t *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->b->index);
}

/* the address of X in the loader's slot: the tests check that x lies there (no copy) */
static PyObject *batch_x_address(tgpy_batch_t *self, void *closure)
{
    return PyLong_FromVoidPtr(self->b->X);
}

static PyGetSetDef batch_getset[] = {
    {"x", (getter)batch_x, NULL, "float32 [num_nodes, feat_dim]: the input nodes' features", NULL},
    {"n_id", (getter)batch_n_id, NULL, "int64 [num_nodes]: the input nodes, seeds first", NULL},
    {"y", (getter)batch_y, NULL, "int64 [batch_size]: the seeds' labels (-1: none)", NULL},
    {"adjs", (getter)batch_adjs, NULL, "per layer, input layer first: Adj(edge_index, e_id, size)",
     NULL},
    {"blocks", (getter)batch_blocks, NULL, "per layer, input layer first: Block (local CSR)", NULL},
    {"batch_size", (getter)batch_size, NULL, "the number of seeds (n_id[:batch_size])", NULL},
    {"num_nodes", (getter)batch_num_nodes, NULL, "the number of input nodes", NULL},
    {"id", (getter)batch_id, NULL, "the batch's number in the epoch", NULL},
    {"epoch", (getter)batch_epoch, NULL, "the epoch it belongs to", NULL},
    {"index", (getter)batch_index, NULL, "its position in this rank's share of the epoch", NULL},
    {"_x_address", (getter)batch_x_address, NULL, "the address of X in the loader's slot", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *batch_repr(tgpy_batch_t *self)
{
    const tg_loader_batch_t *b = self->b;
    return PyUnicode_FromFormat("<tiergnn.Batch epoch %llu id %llu: %u seeds, %u input nodes, "
                                "%d layers, feat_dim %u>",
                                (unsigned long long)b->epoch, (unsigned long long)b->batch.id,
                                b->batch.num_seeds, b->batch.num_nodes, b->batch.num_layers,
                                b->dim);
}

static void batch_dealloc(tgpy_batch_t *self)
{
    Py_XDECREF(self->y);
    Py_XDECREF(self->adjs);
    tgpy_loader_t *loader = self->loader;
    tgpy_loader_batch_gone(loader, self->b);
    Py_TYPE(self)->tp_free((PyObject *)self);
    Py_DECREF(loader);
}

PyTypeObject tgpy_batch_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tiergnn.Batch",
    .tp_basicsize = sizeof(tgpy_batch_t),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A batch lent by tiergnn.Loader; it goes back to the loader when the last "
              "reference to it or to one of its arrays dies.",
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_repr = (reprfunc)batch_repr,
    .tp_getset = batch_getset,
};

PyObject *tgpy_batch_new(tgpy_loader_t *loader, const tg_loader_batch_t *b)
{
    tgpy_batch_t *self = PyObject_New(tgpy_batch_t, &tgpy_batch_type);
    if (!self) {
        tg_loader_release(loader->L, b);
        return NULL;
    }
    Py_INCREF(loader);
    self->loader = loader;
    self->b = b;
    self->y = self->adjs = NULL;
    loader->live++;
    return (PyObject *)self;
}
