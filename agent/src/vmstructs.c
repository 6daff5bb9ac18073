/* HotSpot's vmStructs, read in-process: the tables libjvm exports for the
 * serviceability agent (gHotSpotVMStructs, gHotSpotVMTypes and the offsets
 * of their entries' members). The types feature (types.c) and the census
 * roots (roots.c) read them; code.c turns DebugNonSafepoints on with them.
 * A JVM without them (OpenJ9) makes djx_vm_init fail with a reason. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "vmstructs.h"

#define VM_MAX_ENTRIES 100000 /* JDK 25 has ~3000 structs entries: a bound against a bad table */

static struct {
	const char *structs, *types;
	uint64_t s_type, s_field, s_tstring, s_static, s_offset, s_address, s_stride;
	uint64_t t_type, t_size, t_stride;
} vm;

static void *jvm_sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	if (p == NULL) {
		/* libjvm loaded without RTLD_GLOBAL (an embedding launcher). */
		void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
		if (h != NULL)
			p = dlsym(h, name);
	}
	return p;
}

static int sym_u64(const char *name, uint64_t *out)
{
	uint64_t *p = jvm_sym(name);
	if (p == NULL)
		return -1;
	*out = *p;
	return 0;
}

int djx_vm_init(char *err, size_t errlen)
{
	const char **s = jvm_sym("gHotSpotVMStructs"), **t = jvm_sym("gHotSpotVMTypes");

	if (s == NULL || *s == NULL || t == NULL || *t == NULL) {
		snprintf(err, errlen, "not HotSpot: libjvm exports no gHotSpotVMStructs");
		return -1;
	}
	if (sym_u64("gHotSpotVMStructEntryTypeNameOffset", &vm.s_type) || sym_u64("gHotSpotVMStructEntryFieldNameOffset", &vm.s_field) ||
	    sym_u64("gHotSpotVMStructEntryTypeStringOffset", &vm.s_tstring) ||
	    sym_u64("gHotSpotVMStructEntryIsStaticOffset", &vm.s_static) || sym_u64("gHotSpotVMStructEntryOffsetOffset", &vm.s_offset) ||
	    sym_u64("gHotSpotVMStructEntryAddressOffset", &vm.s_address) || sym_u64("gHotSpotVMStructEntryArrayStride", &vm.s_stride) ||
	    sym_u64("gHotSpotVMTypeEntryTypeNameOffset", &vm.t_type) || sym_u64("gHotSpotVMTypeEntrySizeOffset", &vm.t_size) ||
	    sym_u64("gHotSpotVMTypeEntryArrayStride", &vm.t_stride) || vm.s_stride == 0 || vm.t_stride == 0) {
		snprintf(err, errlen, "HotSpot vmStructs: an entry offset symbol is missing");
		return -1;
	}
	vm.structs = *s;
	vm.types = *t;
	return 0;
}

/* The entry type::field, or NULL. */
static const char *find_entry(const char *type, const char *field)
{
	const char *e = vm.structs;

	for (int i = 0; e != NULL && i < VM_MAX_ENTRIES; i++, e += vm.s_stride) {
		const char *tn = *(const char *const *)(e + vm.s_type);
		const char *fn = *(const char *const *)(e + vm.s_field);
		if (tn == NULL)
			return NULL;
		if (fn != NULL && strcmp(tn, type) == 0 && strcmp(fn, field) == 0)
			return e;
	}
	return NULL;
}

void *djx_vm_static(const char *type, const char *field)
{
	const char *e = find_entry(type, field);

	if (e == NULL || *(const int32_t *)(e + vm.s_static) == 0)
		return NULL;
	return *(void *const *)(e + vm.s_address);
}

int djx_vm_field(const char *type, const char *field, uint64_t *off, const char **ftype)
{
	const char *e = find_entry(type, field);

	if (e == NULL || *(const int32_t *)(e + vm.s_static) != 0)
		return -1;
	*off = *(const uint64_t *)(e + vm.s_offset);
	*ftype = *(const char *const *)(e + vm.s_tstring);
	if (*ftype == NULL)
		*ftype = "";
	return 0;
}

int djx_vm_offset(const char *type, const char *field, uint64_t *off)
{
	const char *ftype;

	return djx_vm_field(type, field, off, &ftype);
}

int djx_vm_type_size(const char *type, uint64_t *size)
{
	const char *e = vm.types;

	for (int i = 0; e != NULL && i < VM_MAX_ENTRIES; i++, e += vm.t_stride) {
		const char *tn = *(const char *const *)(e + vm.t_type);
		if (tn == NULL)
			return -1;
		if (strcmp(tn, type) == 0) {
			*size = *(const uint64_t *)(e + vm.t_size);
			return 0;
		}
	}
	return -1;
}

/* A long constant (markWord::klass_shift) from gHotSpotVMLongConstants:
 * {name, value} entries up to a NULL name. */
int djx_vm_long_const(const char *name, uint64_t *out)
{
	const char **tab = jvm_sym("gHotSpotVMLongConstants");
	uint64_t o_name, o_value, stride;
	const char *e;

	if (tab == NULL || *tab == NULL || sym_u64("gHotSpotVMLongConstantEntryNameOffset", &o_name) ||
	    sym_u64("gHotSpotVMLongConstantEntryValueOffset", &o_value) ||
	    sym_u64("gHotSpotVMLongConstantEntryArrayStride", &stride) || stride == 0)
		return -1;
	e = *tab;
	for (int i = 0; i < VM_MAX_ENTRIES; i++, e += stride) {
		const char *n = *(const char *const *)(e + o_name);
		if (n == NULL)
			return -1;
		if (strcmp(n, name) == 0) {
			*out = *(const uint64_t *)(e + o_value);
			return 0;
		}
	}
	return -1;
}

/* The JVMFlag entry of a -XX flag in HotSpot's flag table (JVMFlag::flags)
 * and the offset of its _flags word (origin bits), or NULL. */
static const char *flag_entry(const char *name, uint64_t *o_flags)
{
	void *const *flags = djx_vm_static("JVMFlag", "flags");
	const size_t *num = djx_vm_static("JVMFlag", "numFlags");
	uint64_t o_name, o_addr, size;

	if (flags == NULL || num == NULL || *flags == NULL || djx_vm_offset("JVMFlag", "_name", &o_name) ||
	    djx_vm_offset("JVMFlag", "_addr", &o_addr) || djx_vm_type_size("JVMFlag", &size) || size == 0)
		return NULL;
	if (o_flags != NULL && djx_vm_offset("JVMFlag", "_flags", o_flags))
		return NULL;
	for (size_t i = 0; i < *num && i < VM_MAX_ENTRIES; i++) {
		const char *f = (const char *)*flags + i * size;
		const char *fn = *(const char *const *)(f + o_name);
		const uint8_t *addr = *(const uint8_t *const *)(f + o_addr);
		if (fn != NULL && addr != NULL && strcmp(fn, name) == 0)
			return f;
	}
	return NULL;
}

static uint8_t *flag_addr(const char *f)
{
	uint64_t o_addr;

	if (djx_vm_offset("JVMFlag", "_addr", &o_addr))
		return NULL;
	return *(uint8_t *const *)(f + o_addr);
}

/* A bool -XX flag from HotSpot's flag table (JVMFlag::flags): 0 or 1, or
 * -1 when this JVM has no such flag. */
int djx_vm_flag(const char *name)
{
	const char *f = flag_entry(name, NULL);
	const uint8_t *addr = f != NULL ? flag_addr(f) : NULL;

	return addr == NULL ? -1 : *addr != 0;
}

#define FLAG_ORIGIN_MASK 15 /* JVMFlag::VALUE_ORIGIN_MASK (JDK 11-25) */
#define FLAG_ORIGIN_DEFAULT 0

/* Sets a bool -XX flag to on unless it was set (command line, environment,
 * management): 2 when this changed it, 1 when it was so already, 0 when it
 * was chosen otherwise, -1 when this JVM has no such flag. One byte store,
 * as async-profiler does for DebugNonSafepoints. */
int djx_vm_flag_set(const char *name, int on)
{
	uint64_t o_flags;
	const char *f = flag_entry(name, &o_flags);
	uint8_t *addr = f != NULL ? flag_addr(f) : NULL;

	if (addr == NULL)
		return -1;
	if ((*addr != 0) == (on != 0))
		return 1;
	if ((*(const uint32_t *)(f + o_flags) & FLAG_ORIGIN_MASK) != FLAG_ORIGIN_DEFAULT)
		return 0;
	*addr = on != 0;
	return 2;
}
