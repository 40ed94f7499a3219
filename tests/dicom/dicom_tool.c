/* dicom_tool.c — `dicom_tool dicom info ...`: the `gpujobd dicom` subcommand as a
 * standalone binary, so the
 * dicom suite does not depend on the service linking. */
#include "infer/dicom.h"

int main(int argc, char **argv)
{
    return gj_dicom_cli_main(argc - 1, argv + 1);  /* argv[1] is "dicom" */
}
