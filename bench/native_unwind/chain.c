/* The call chain native_unwind.c unwinds through: built three ways by run.sh (frame
 * pointers and unwind tables; no frame pointers; neither frame pointers nor unwind
 * tables), as the libraries a traced process loads are. */
typedef int (*leaf_fn)(void);

__attribute__((noinline)) int chain(int depth, leaf_fn leaf) {
  if (depth == 0) return leaf();
  int r = chain(depth - 1, leaf);
  __asm__ volatile("" ::: "memory"); /* no tail call: every level keeps its frame */
  return r + 1;
}
