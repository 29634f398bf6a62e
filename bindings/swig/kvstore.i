/* kvstore.i - the one language-neutral SWIG interface of libkvstore.
 *
 * It wraps the real public headers (never a copied declaration list). Everything that is
 * specific to a language - typemaps, renames, library loading, callback trampolines - lives
 * in that language's file under bindings/swig/<language>/, included first.
 * The module name is given on the SWIG command line (-module) by each language's build.
 */
#if defined(SWIGJAVA)
%include "java/kvstore_java.i"
#elif defined(SWIGPERL)
%include "perl/kvstore_perl.i"
#endif

%{
#include "kvstore/kvstore.h"
%}

%include "kvstore/kvstore_errors.h"
%include "kvstore/kvstore.h"
