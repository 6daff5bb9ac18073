/* HotSpot's vmStructs tables, read in-process (types.c, roots.c, code.c, unwind.c). */
#ifndef DJX_VMSTRUCTS_H
#define DJX_VMSTRUCTS_H

#include <stddef.h>
#include <stdint.h>

int djx_vm_init(char *err, size_t errlen); /* 0, or -1 (not HotSpot) with err */
void *djx_vm_static(const char *type, const char *field); /* a static's address, or NULL */
int djx_vm_offset(const char *type, const char *field, uint64_t *off);
/* A non-static field's offset and its type's name ("int", "address"). */
int djx_vm_field(const char *type, const char *field, uint64_t *off, const char **ftype);
int djx_vm_type_size(const char *type, uint64_t *size);
int djx_vm_long_const(const char *name, uint64_t *out); /* gHotSpotVMLongConstants: 0, or -1 absent */
int djx_vm_flag(const char *name);    /* a bool -XX flag: 0, 1, or -1 absent */
int djx_vm_flag_set(const char *name, int on); /* a default bool flag: 2 changed, 1 was so, 0 chosen, -1 absent */

#endif
