# make-reconstructed.sh: regenerate the reconstructed fixture trees.
# Run from sources/pmu/testdata/machines: (cd machines && bash ../make-reconstructed.sh)
# Sources for every value are listed in README.txt.
# w PATH CONTENT: write one fixture file
w() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$2" >"$1"; }
common() { # $1 root, $2 paranoid, $3 release
	w "$1/proc/sys/kernel/perf_event_paranoid" "$2"
	w "$1/proc/sys/kernel/osrelease" "$3"
	d="$1/sys/bus/event_source/devices"
	w "$d/software/type" 1
	w "$d/tracepoint/type" 2
	w "$d/breakpoint/type" 5
	w "$d/uprobe/type" 7
	w "$d/uprobe/format/retprobe" "config:0"
	w "$d/kprobe/type" 6
	w "$d/kprobe/format/retprobe" "config:0"
}
intel_core_formats() { # $1 pmu dir
	w "$1/format/event" "config:0-7"
	w "$1/format/umask" "config:8-15"
	w "$1/format/edge" "config:18"
	w "$1/format/pc" "config:19"
	w "$1/format/inv" "config:23"
	w "$1/format/cmask" "config:24-31"
	w "$1/format/in_tx" "config:32"
	w "$1/format/in_tx_cp" "config:33"
	w "$1/format/offcore_rsp" "config1:0-63"
	w "$1/format/ldlat" "config1:0-15"
	w "$1/format/frontend" "config1:0-23"
}

# Intel Xeon (Skylake-SP, family 6 model 85), bare metal.
r=intel-skylake-sp
common $r 2 "5.15.0-91-generic"
w $r/proc/cpuinfo "processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 85
model name	: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz
stepping	: 4
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm 3dnowprefetch avx512f avx512dq avx512cd avx512bw avx512vl
"
c=$r/sys/bus/event_source/devices/cpu
w $c/type 4
intel_core_formats $c
w $c/format/any "config:21"
w $c/caps/pmu_name skylake
w $c/caps/max_precise 3
w $c/caps/branches 32
w $c/events/mem-loads "event=0xcd,umask=0x1,ldlat=3"
w $c/events/mem-stores "event=0xd0,umask=0x82"
w $c/events/cycles-ct "event=0x3c,in_tx=1,in_tx_cp=1"
w $r/sys/bus/event_source/devices/msr/type 9
w $r/sys/bus/event_source/devices/msr/format/event "config:0-63"
w $r/sys/bus/event_source/devices/intel_pt/type 8

# Intel Alder Lake hybrid (family 6 model 151): cpu_core + cpu_atom.
r=intel-alderlake-hybrid
common $r 2 "6.8.0-45-generic"
w $r/proc/cpuinfo "processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 151
model name	: 12th Gen Intel(R) Core(TM) i9-12900K
stepping	: 2
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology nonstop_tsc cpuid aperfmperf pni hybrid_cpu
"
c=$r/sys/bus/event_source/devices/cpu_core
w $c/type 4
intel_core_formats $c
w $c/cpus "0-15"
w $c/caps/pmu_name alderlake_hybrid
w $c/caps/max_precise 3
w $c/events/mem-loads "event=0xcd,umask=0x1,ldlat=3"
w $c/events/mem-stores "event=0xcd,umask=0x2"
w $c/events/mem-loads-aux "event=0x03,umask=0x82"
a=$r/sys/bus/event_source/devices/cpu_atom
w $a/type 8
w $a/cpus "16-23"
w $a/format/event "config:0-7"
w $a/format/umask "config:8-15"
w $a/format/edge "config:18"
w $a/format/pc "config:19"
w $a/format/inv "config:23"
w $a/format/cmask "config:24-31"
w $a/format/offcore_rsp "config1:0-63"
w $a/format/ldlat "config1:0-15"
w $a/caps/pmu_name alderlake_hybrid
w $a/caps/max_precise 3
w $a/events/mem-loads "event=0xd0,umask=0x5,ldlat=3"
w $a/events/mem-stores "event=0xd0,umask=0x6"

# Intel Ice Lake KVM guest with a vPMU but no PEBS passthrough.
r=intel-icelake-kvm-guest
common $r 2 "6.1.0-18-cloud-amd64"
w $r/proc/cpuinfo "processor	: 0
vendor_id	: GenuineIntel
cpu family	: 6
model		: 106
model name	: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
stepping	: 6
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc arch_perfmon rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni hypervisor
"
c=$r/sys/bus/event_source/devices/cpu
w $c/type 4
intel_core_formats $c
w $c/caps/pmu_name icelake
w $c/caps/max_precise 0
w $c/events/mem-loads "event=0xcd,umask=0x1,ldlat=3"
w $c/events/mem-stores "event=0xcd,umask=0x2"

# AMD EPYC Genoa (Zen 4, family 25 model 17), bare metal, Linux 6.14+.
r=amd-zen4-genoa
common $r 2 "6.14.0-29-generic"
w $r/proc/cpuinfo "processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC 9654 96-Core Processor
stepping	: 1
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good amd_lbr_v2 nopl nonstop_tsc cpuid extd_apicid aperfmperf pni monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 hw_pstate ssbd mba perfmon_v2
"
c=$r/sys/bus/event_source/devices/cpu
w $c/type 4
w $c/format/event "config:0-7,32-35"
w $c/format/umask "config:8-15"
w $c/format/edge "config:18"
w $c/format/inv "config:23"
w $c/format/cmask "config:24-31"
w $c/caps/max_precise 2
w $c/caps/branches 16
o=$r/sys/bus/event_source/devices/ibs_op
w $o/type 11
w $o/format/cnt_ctl "config:19"
w $o/format/l3missonly "config:16"
w $o/format/swfilt "config2:0"
w $o/caps/zen4_ibs_extensions 1
f=$r/sys/bus/event_source/devices/ibs_fetch
w $f/type 10
w $f/format/rand_en "config:57"
w $f/format/l3missonly "config:59"
w $f/format/swfilt "config2:0"
w $r/sys/bus/event_source/devices/amd_df/type 12
w $r/sys/bus/event_source/devices/amd_l3/type 13

# AMD EPYC Milan (Zen 3, family 25 model 1) on Linux 6.1: ibs_op without
# swfilt, so no user/kernel filtering.
r=amd-zen3-milan-6.1
common $r 2 "6.1.0-25-amd64"
w $r/proc/cpuinfo "processor	: 0
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 1
model name	: AMD EPYC 7763 64-Core Processor
stepping	: 1
flags		: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl nonstop_tsc cpuid extd_apicid aperfmperf pni ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc
"
c=$r/sys/bus/event_source/devices/cpu
w $c/type 4
w $c/format/event "config:0-7,32-35"
w $c/format/umask "config:8-15"
w $c/format/edge "config:18"
w $c/format/inv "config:23"
w $c/format/cmask "config:24-31"
w $c/caps/max_precise 2
o=$r/sys/bus/event_source/devices/ibs_op
w $o/type 9
w $o/format/cnt_ctl "config:19"
f=$r/sys/bus/event_source/devices/ibs_fetch
w $f/type 8
w $f/format/rand_en "config:57"

# ARM Neoverse N1 (AWS Graviton2 / Ampere Altra), bare metal, with SPE.
r=arm-neoverse-n1
common $r 2 "6.8.0-1015-aws"
w $r/proc/cpuinfo "processor	: 0
BogoMIPS	: 243.75
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs
CPU implementer	: 0x41
CPU architecture: 8
CPU variant	: 0x3
CPU part	: 0xd0c
CPU revision	: 1
"
c=$r/sys/bus/event_source/devices/armv8_pmuv3_0
w $c/type 8
w $c/cpus "0-63"
w $c/format/event "config:0-15"
w $c/format/long "config1:0"
s=$r/sys/bus/event_source/devices/arm_spe_0
w $s/type 9
w $s/cpumask "0-63"
w $s/format/ts_enable "config:0"
w $s/format/pa_enable "config:1"
w $s/format/pct_enable "config:2"
w $s/format/jitter "config:16"
w $s/format/branch_filter "config:32"
w $s/format/load_filter "config:33"
w $s/format/store_filter "config:34"
w $s/format/event_filter "config1:0-63"
w $s/format/min_latency "config2:0-11"
w $s/caps/arch_inst 1
w $s/caps/count_size 12
w $s/caps/ernd 1
w $s/caps/min_interval 1024
