/* plain STREAM-style triad for scripts/crosscheck/run.sh */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
#define N (64L*1024*1024)  /* 3 x 512 MiB */
int main(){ double *a=malloc(N*8),*b=malloc(N*8),*c=malloc(N*8); double s=3.0;
#pragma omp parallel for schedule(static)
 for(long i=0;i<N;i++){a[i]=0;b[i]=1;c[i]=2;}
 double best=1e30;
 for(int r=0;r<10;r++){ double t=omp_get_wtime();
#pragma omp parallel for schedule(static)
  for(long i=0;i<N;i++) a[i]=b[i]+s*c[i];
  t=omp_get_wtime()-t; if(t<best)best=t;}
 printf("threads=%d triad best %.2f GB/s (check %g)\n",omp_get_max_threads(),24.0*N/best/1e9,a[N/2]);}
