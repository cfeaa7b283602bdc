#!/usr/bin/env python3
"""Host memory kept as a memfd (HostDevice's kMemfd backing) on a GPU machine:
commit 8 GiB by fallocate on 1 and 8 threads; pin it in 1 GiB pieces
(cuMemHostRegister) on 1 and 8 threads; the GPU copying into it pinned, on 1
and 8 streams of 8 MiB pieces; unpin. Anonymous memory's rows for the same
steps: bench/spill_rates.py. The lines below are the ones that ran.

  python3 bench/memfd_pin_rates.py
"""
import ctypes,os,mmap,time,threading
G=1<<30;n=8
L=ctypes.CDLL(None,use_errno=True);L.mmap.restype=ctypes.c_void_p
L.mmap.argtypes=[ctypes.c_void_p,ctypes.c_size_t,ctypes.c_int,ctypes.c_int,ctypes.c_int,ctypes.c_long]
cu=ctypes.CDLL("libcuda.so.1")
def par(k,f):
 ts=[threading.Thread(target=f,args=(i,)) for i in range(k)];t=time.monotonic()
 [x.start() for x in ts];[x.join() for x in ts];return time.monotonic()-t
def mem(th):
 fd=os.memfd_create("x");os.ftruncate(fd,n*G);p=n*G//th
 s=par(th,lambda i:os.posix_fallocate(fd,i*p,p))
 a=L.mmap(None,n*G,3,mmap.MAP_SHARED,fd,0);os.close(fd);return a,n*G/s/1e9
for th in(1,8):
 a,r=mem(th);L.munmap(ctypes.c_void_p(a),n*G);print("memfd fallocate",th,"threads %.1f GB/s"%r)
cu.cuInit(0);d=ctypes.c_int();cu.cuDeviceGet(ctypes.byref(d),0);c=ctypes.c_void_p()
cu.cuDevicePrimaryCtxRetain(ctypes.byref(c),d)
def cur():cu.cuCtxSetCurrent(c)
cur()
for th in(1,8):
 a,_=mem(8)
 def w(i):
  cur()
  for k in range(i,n,th):assert cu.cuMemHostRegister_v2(ctypes.c_void_p(a+k*G),ctypes.c_size_t(G),1)==0
 s=par(th,w);print("register memfd",th,"threads %.1f GB/s"%(n*G/s/1e9))
 if th==8:
  dv=ctypes.c_uint64();cu.cuMemAlloc_v2(ctypes.byref(dv),ctypes.c_size_t(n*G));cu.cuMemsetD8_v2(dv,7,ctypes.c_size_t(n*G));cu.cuCtxSynchronize()
  for st in(1,8):
   per=n*G//st
   def cp(i):
    cur();s_=ctypes.c_void_p();cu.cuStreamCreate(ctypes.byref(s_),1)
    for o in range(0,per,8<<20):cu.cuMemcpyDtoHAsync_v2(ctypes.c_void_p(a+i*per+o),ctypes.c_uint64(dv.value+i*per+o),ctypes.c_size_t(8<<20),s_)
    cu.cuStreamSynchronize(s_)
   print("DtoH pinned memfd",st,"streams %.1f GB/s"%(n*G/par(st,cp)/1e9))
 t=time.monotonic()
 for k in range(n):cu.cuMemHostUnregister(ctypes.c_void_p(a+k*G))
 print("unregister %.1f GB/s"%(n*G/(time.monotonic()-t)/1e9));L.munmap(ctypes.c_void_p(a),n*G)
