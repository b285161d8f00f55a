// glibc 2.34 compatibility of libnccl-net-ha.so (linked with -static-libgcc, see ../CMakeLists.txt).
//
// libgcc's unwinder (libgcc_eh.a) built against glibc >= 2.35 finds the unwind tables of a PC
// with _dl_find_object@GLIBC_2.35, which would make the plugin fail to load on glibc 2.34 (RHEL 9
// and its rebuilds). This definition is linked before libgcc_eh.a, so the plugin's copy of the
// unwinder binds to it (the version script keeps it local: nothing else sees it). It forwards to
// the running glibc's _dl_find_object when there is one, else finds the object containing the PC
// with dl_iterate_phdr (what libgcc does on glibc < 2.35), filling the fields libgcc reads.
#include <dlfcn.h>
#include <link.h>

#include <cstdint>

namespace {

using FindObjectFn = int (*)(void*, dl_find_object*);

// Resolved once at load time (in dlopen, not during an unwind); null on glibc < 2.35. The
// plugin's own definition is not in its dynamic symbol table, so this finds glibc's or nothing.
FindObjectFn resolve_glibc() {
#ifdef NCCL_HA_COMPAT_FORCE_FALLBACK  // the unit test of the fallback
  return nullptr;
#else
  return reinterpret_cast<FindObjectFn>(dlsym(RTLD_DEFAULT, "_dl_find_object"));
#endif
}
const FindObjectFn g_glibc_find_object = resolve_glibc();

struct Search {
  std::uintptr_t pc;
  dl_find_object* out;
  bool found;
};

int visit(dl_phdr_info* info, std::size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  std::uintptr_t lo = UINTPTR_MAX, hi = 0, eh_frame = 0;
  bool inside = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      std::uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
      if (start < lo) lo = start;
      if (end > hi) hi = end;
      if (s->pc >= start && s->pc < end) inside = true;
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      eh_frame = info->dlpi_addr + ph.p_vaddr;
    }
  }
  if (!inside) return 0;
  *s->out = dl_find_object{};
  s->out->dlfo_map_start = reinterpret_cast<void*>(lo);
  s->out->dlfo_map_end = reinterpret_cast<void*>(hi);
  s->out->dlfo_eh_frame = reinterpret_cast<void*>(eh_frame);
  s->found = true;
  return 1;
}

}  // namespace

#ifdef NCCL_HA_COMPAT_FORCE_FALLBACK
int nccl_ha_compat_fallback_calls = 0;
#endif

extern "C" int _dl_find_object(void* pc, dl_find_object* out) noexcept {
  if (g_glibc_find_object) return g_glibc_find_object(pc, out);
#ifdef NCCL_HA_COMPAT_FORCE_FALLBACK
  ++nccl_ha_compat_fallback_calls;
#endif
  Search s{reinterpret_cast<std::uintptr_t>(pc), out, false};
  dl_iterate_phdr(visit, &s);
  return s.found ? 0 : -1;
}
