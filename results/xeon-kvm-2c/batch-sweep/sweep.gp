set terminal pngcairo size 1000,650
set output 'results/xeon-kvm-2c/batch-sweep/batch-sweep.png'
set logscale xy 2
set xlabel 'batch B'
set ylabel 'GFLOP/s'
set title sprintf('gemv\_q n=%d, %d threads, cold: measured vs min(peak, I(B) x BW), BW=%.1f GB/s, peak=%.0f GFLOP/s', 18432, 2, 22.065026513559012, 327.7021757578241)
set key left top
P = 18432.0 * 18432.0
d = 2.0 * 18432
I(B, bp) = 2 * P * B / (P * bp + B * d * 4)
roof(B, bp) = (I(B, bp) * 22.065026513559012 < 327.7021757578241) ? I(B, bp) * 22.065026513559012 : 327.7021757578241
R = 327.7021757578241 / 22.065026513559012
cross(bp) = R * P * bp / (2 * P - R * d * 4)
set arrow from cross(4), graph 0 to cross(4), graph 1 nohead dt 2 lc 1
set arrow from cross(2), graph 0 to cross(2), graph 1 nohead dt 2 lc 2
set arrow from cross(1.0005), graph 0 to cross(1.0005), graph 1 nohead dt 2 lc 3
set arrow from cross(0.53125), graph 0 to cross(0.53125), graph 1 nohead dt 2 lc 4
set label sprintf('fp32 ridge B=%.1f', cross(4)) at cross(4), graph 0.05 rotate by 90 offset -1,0
set label sprintf('int4 ridge B=%.1f', cross(0.53125)) at cross(0.53125), graph 0.05 rotate by 90 offset -1,0
set xrange [1:256]
plot roof(x, 4) w l lc 1 t 'fp32 formula', roof(x, 2) w l lc 2 t 'bf16 formula',      roof(x, 1.0005) w l lc 3 t 'int8 formula', roof(x, 0.53125) w l lc 4 t 'int4 g64 formula',      '< grep "^fp32 " results/xeon-kvm-2c/batch-sweep/measured.dat' u 2:3 w lp lc 1 pt 7 t 'fp32 measured',      '< grep "^bf16 " results/xeon-kvm-2c/batch-sweep/measured.dat' u 2:3 w lp lc 2 pt 7 t 'bf16 measured',      '< grep "^int8_channel " results/xeon-kvm-2c/batch-sweep/measured.dat' u 2:3 w lp lc 3 pt 7 t 'int8 measured',      '< grep "^int4_g64_sym " results/xeon-kvm-2c/batch-sweep/measured.dat' u 2:3 w lp lc 4 pt 7 t 'int4 g64 measured'
