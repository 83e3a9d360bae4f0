# Optional RDKit for SMILES parsing (weft/io/molecule_graph.h). WEFT_WITH_RDKIT: AUTO (use it
# when found), ON (fail without it) or OFF. Upstream RDKit installs a CMake package; Debian's
# librdkit-dev does not, so the headers and libraries are then looked up directly.
set(WEFT_WITH_RDKIT AUTO CACHE STRING "Parse SMILES with RDKit: OFF, ON or AUTO")
set_property(CACHE WEFT_WITH_RDKIT PROPERTY STRINGS OFF ON AUTO)
set(WEFT_HAVE_RDKIT OFF)
if(NOT WEFT_WITH_RDKIT STREQUAL "OFF")
  find_package(RDKit CONFIG QUIET)
  if(RDKit_FOUND AND TARGET RDKit::SmilesParse)
    set(WEFT_RDKIT_INCLUDE_DIRS "")
    set(WEFT_RDKIT_LIBRARIES RDKit::SmilesParse RDKit::GraphMol RDKit::RDGeneral)
    set(WEFT_HAVE_RDKIT ON)
  else()
    find_path(WEFT_RDKIT_INCLUDE_DIR GraphMol/SmilesParse/SmilesParse.h PATH_SUFFIXES rdkit)
    find_path(WEFT_BOOST_INCLUDE_DIR boost/iostreams/tee.hpp)
    find_library(WEFT_RDKIT_SMILES_LIBRARY RDKitSmilesParse)
    find_library(WEFT_RDKIT_GRAPHMOL_LIBRARY RDKitGraphMol)
    find_library(WEFT_RDKIT_GENERAL_LIBRARY RDKitRDGeneral)
    if(WEFT_RDKIT_INCLUDE_DIR AND WEFT_BOOST_INCLUDE_DIR AND WEFT_RDKIT_SMILES_LIBRARY
       AND WEFT_RDKIT_GRAPHMOL_LIBRARY AND WEFT_RDKIT_GENERAL_LIBRARY)
      set(WEFT_RDKIT_INCLUDE_DIRS ${WEFT_RDKIT_INCLUDE_DIR} ${WEFT_BOOST_INCLUDE_DIR})
      set(WEFT_RDKIT_LIBRARIES ${WEFT_RDKIT_SMILES_LIBRARY} ${WEFT_RDKIT_GRAPHMOL_LIBRARY}
                               ${WEFT_RDKIT_GENERAL_LIBRARY})
      set(WEFT_HAVE_RDKIT ON)
    endif()
  endif()
  if(WEFT_HAVE_RDKIT)
    message(STATUS "weft: RDKit found; SMILES parsing enabled")
  elseif(WEFT_WITH_RDKIT STREQUAL "ON")
    message(FATAL_ERROR "weft: WEFT_WITH_RDKIT=ON but RDKit was not found; install librdkit-dev "
                        "and libboost-dev (scripts/install_deps.sh) or use -DWEFT_WITH_RDKIT=AUTO")
  else()
    message(STATUS "weft: RDKit not found (install librdkit-dev libboost-dev); parse_smiles "
                   "will throw a clear error")
  endif()
endif()
